// feed and fetch: the executor's entry and exit. Kernel-less ops (they run the same on every dtype).
// feed copies column `col` of the feed list into its output (the one copy of a fed array, recorded as
// a memcpy); fetch copies a variable into a fresh buffer so the returned numpy array owns its memory
// and later runs never overwrite it.
#include "logging.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(feed, op) {
  op.Doc("Copies column `col` of the feed list X into Out.")
      .Input("X", "the feed list variable (FEED_MINIBATCH)")
      .Output("Out", "the fed variable")
      .Attr<int32_t>("col", 0, "column of the feed list")
      .SetRun([](const ExecutionContext& ctx) {
        const TensorList& list = *ctx.InputVar("X")->GetMutableTensorList();
        int col = ctx.Attr<int32_t>("col");
        FL_ENFORCE(col >= 0 && col < static_cast<int>(list.size()), "feed: column ", col, " is out of range (",
                   list.size(), " fed tensors)");
        FL_VLOG(3) << "Feed Var " << ctx.InputName("X") << "'s " << col << " column to var " << ctx.OutputName("Out");
        TensorCopy(list[col], ctx.place(), ctx.Output("Out"));
      });
}

FL_REGISTER_OP(fetch, op) {
  op.Doc("Copies X into column `col` of the fetch list Out (to CPU memory unless keep_place).")
      .Input("X", "the fetched variable")
      .Output("Out", "the fetch list variable (FETCH_LIST)")
      .Attr<int32_t>("col", 0, "column of the fetch list")
      .Attr<bool>("keep_place", false,
                  "copy to the variable's own place (a GPU) instead of the host: Executor.run(fetch_on_device=True), "
                  "for DLPack consumers")
      .SetRun([](const ExecutionContext& ctx) {
        // Fluid's fetch takes LoDTensors only; a SelectedRows is read through the scope instead.
        FL_ENFORCE(!ctx.InputVar("X")->IsSelectedRows(), "fetch: variable '", ctx.InputName("X"),
                   "' holds a SelectedRows (a sparse gradient), which fetch cannot return; read it with "
                   "scope.find_var('",
                   ctx.InputName("X"), "').get_selected_rows() (rows(), height(), get_tensor())");
        FL_ENFORCE(!ctx.InputVar("X")->IsRankTable(), "fetch: variable '", ctx.InputName("X"),
                   "' holds a LoDRankTable, which fetch cannot return; read it with scope.find_var('",
                   ctx.InputName("X"), "').get_lod_rank_table().items()");
        FetchList& list = *ctx.OutputVar("Out")->GetMutableFetchList();
        int col = ctx.Attr<int32_t>("col");
        // The executor sizes the list to its fetch targets: a crafted col must not grow it (col=30M: 4 GiB).
        FL_ENFORCE(col >= 0 && col < static_cast<int>(list.size()), "fetch: column ", col, " of variable '",
                   ctx.InputName("X"), "' is out of range: the fetch list '", ctx.OutputName("Out"), "' has ",
                   list.size(), " entries");
        FL_VLOG(3) << "Fetch variable " << ctx.InputName("X") << " to " << ctx.OutputName("Out");
        // A LoDTensorArray is fetched whole (Fluid 1.8): every entry copied, an entry never written stays empty.
        if (const TensorList* array = ctx.InputVar("X")->GetTensorList()) {
          TensorList copy(array->size());
          for (size_t i = 0; i < array->size(); ++i) {
            const Tensor& t = (*array)[i];
            if (t.IsInitialized()) TensorCopy(t, Place::CPU(), &copy[i]);
            else copy[i].set_lod(t.lod());
          }
          list[col] = std::move(copy);
          return;
        }
        const Tensor* src = ctx.InputOrNull("X");
        FL_ENFORCE(src != nullptr, "fetch: variable '", ctx.InputName("X"),
                   "' was never computed (no op before the fetch writes it and it was not fed)");
        if (!std::holds_alternative<Tensor>(list[col])) list[col] = Tensor();
        const Place to = ctx.Attr<bool>("keep_place") ? src->place() : Place::CPU();
        TensorCopy(*src, to, &std::get<Tensor>(list[col]));
      });
}

}  // namespace fl
