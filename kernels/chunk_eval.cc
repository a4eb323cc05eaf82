// chunk_eval: precision, recall and F1 of chunk detection (Fluid's chunk_eval_op), comparing the chunks of each
// sequence of Inference with those of Label. An id encodes chunk_type * num_tag_types + tag_type; the tag types of
// each scheme (Begin, Inside, End, Single) are
//     plain: -  -  -  -  (one tag type: a chunk is a run of one chunk type)
//     IOB:   0  1  -  -      IOE: -  0  1  -      IOBES: 0  1  2  3
// and the id num_chunk_types * num_tag_types is O (outside any chunk). A chunk starts at a non-O id after an O, after
// another chunk type, at a B or S tag, or at an I or E tag right after an E or S; it runs until the next start or O.
// A chunk is correct when Inference and Label have it with the same first and last position and type; chunk types in
// excluded_chunk_types are not counted. Precision = correct / inferred, Recall = correct / labelled, F1 = 2PR / (P+R),
// each 0 when its denominator (for F1: correct) is 0.
#include <algorithm>
#include <string>
#include <vector>

#include "helpers/crf.h"
#include "op_context.h"

namespace fl {

namespace {

struct ChunkScheme {
  int64_t tag_types;
  int64_t begin, inside, end, single;  // -1: the scheme has no such tag
};

ChunkScheme SchemeOf(const std::string& name) {
  if (name == "IOB") return {2, 0, 1, -1, -1};
  if (name == "IOE") return {2, -1, 0, 1, -1};
  if (name == "IOBES") return {4, 0, 1, 2, 3};
  return {1, -1, -1, -1, -1};  // plain (the attribute's OneOf admits nothing else)
}

struct Chunk {
  int64_t first, last, type;
  bool operator==(const Chunk& o) const { return first == o.first && last == o.last && type == o.type; }
};

// Whether a chunk starts at a position of (tag, type) that follows one of (prev_tag, prev_type); `other` is O's type.
bool StartsChunk(const ChunkScheme& c, int64_t other, int64_t prev_tag, int64_t prev_type, int64_t tag, int64_t type) {
  if (type == other) return false;
  if (prev_type == other || prev_type != type) return true;
  if (tag == c.begin || tag == c.single) return true;
  if (tag == c.inside || tag == c.end) return prev_tag == c.end || prev_tag == c.single;
  return false;
}

// The chunks of ids[0, len), in order.
void ChunksOf(const int64_t* ids, int64_t len, const ChunkScheme& c, int64_t other, std::vector<Chunk>* out) {
  out->clear();
  int64_t prev_tag = -1, prev_type = other;
  for (int64_t k = 0; k < len; ++k) {
    const int64_t tag = ids[k] % c.tag_types, type = ids[k] / c.tag_types;
    const bool starts = StartsChunk(c, other, prev_tag, prev_type, tag, type);
    if (prev_type != other && (starts || type == other)) out->back().last = k - 1;
    if (starts) out->push_back(Chunk{k, len - 1, type});
    prev_tag = tag;
    prev_type = type;
  }
}

void ChunkEvalInferShape(InferShapeContext& ctx) {
  const DDim inf = ctx.InputDim("Inference");
  const DDim lab = ctx.InputDim("Label");
  bool same = inf.size() == lab.size();
  for (int d = 0; same && d < inf.size(); ++d) same = inf[d] < 0 || lab[d] < 0 || inf[d] == lab[d];
  FL_ENFORCE(same, ctx.Type(), ": ", ctx.Describe("Inference"), " and ", ctx.Describe("Label"),
             " must have the same shape");
  for (const char* slot : {"Inference", "Label"}) {
    const DType t = ctx.InputDType(slot);
    FL_ENFORCE(t == DType::INT64 || t == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe(slot),
               " must be int64 tag ids, got ", DTypeName(t));
  }
  if (ctx.HasInput("SeqLength")) {
    FL_ENFORCE(inf.size() == 2 || (inf.size() == 3 && (inf[2] == 1 || inf[2] < 0)), ctx.Type(), ": ",
               ctx.Describe("Inference"), " must be [N, L] or [N, L, 1] when SeqLength is given (the padded form)");
    const DDim n = ctx.InputDim("SeqLength");
    FL_ENFORCE(n.size() == 1 || (n.size() == 2 && (n[1] == 1 || n[1] < 0)), ctx.Type(), ": ", ctx.Describe("SeqLength"),
               " must be [N] or [N, 1]");
    FL_ENFORCE(n[0] < 0 || inf[0] < 0 || n[0] == inf[0], ctx.Type(), ": ", ctx.Describe("SeqLength"),
               " must hold one length per row of ", ctx.Describe("Inference"));
    const DType t = ctx.InputDType("SeqLength");
    FL_ENFORCE(t == DType::INT64 || t == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe("SeqLength"),
               " must be int64, got ", DTypeName(t));
  }
  for (const char* slot : {"Precision", "Recall", "F1-Score"}) ctx.SetOutput(slot, DDim{1}, DType::FP32);
  for (const char* slot : {"NumInferChunks", "NumLabelChunks", "NumCorrectChunks"})
    ctx.SetOutput(slot, DDim{1}, DType::INT64);
}

const auto kChunkEval = [](const ExecutionContext& ctx, auto) {
  const std::string& scheme_name = ctx.Attr<std::string>("chunk_scheme");
  const ChunkScheme scheme = SchemeOf(scheme_name);
  const int64_t other = ctx.Attr<int32_t>("num_chunk_types");  // O's chunk type
  std::vector<int32_t> excluded = ctx.Attr<std::vector<int32_t>>("excluded_chunk_types");
  std::sort(excluded.begin(), excluded.end());
  auto counted = [&](const Chunk& c) { return !std::binary_search(excluded.begin(), excluded.end(), c.type); };
  // As in Fluid: a Label with LoD is read by its LoD (SeqLength, if given, is not read), else SeqLength is needed.
  const bool lod = !ctx.Input("Label").lod().empty();
  FL_ENFORCE(lod || ctx.HasInput("SeqLength"), ctx.Type(), ": Label '", ctx.InputName("Label"), "' ",
             ctx.Input("Label").dims(),
             " has no LoD: feed Inference and Label as LoDTensors, or give SeqLength for padded [N, L] inputs");
  const SequenceSpans spans =
      lod ? LoDSpans(ctx, "Label", "Inference", true) : PaddedSpans(ctx, "Inference", "SeqLength");
  const std::string ids = Str("an id of ", other, " chunk types x ", scheme.tag_types, " tag types (scheme ",
                              scheme_name, "; ", other * scheme.tag_types, " is O)");
  CheckIdsInRange(ctx, "Inference", spans, other * scheme.tag_types, ids);
  CheckIdsInRange(ctx, "Label", spans, other * scheme.tag_types, ids);
  const int64_t* inference = ctx.Input("Inference").data<int64_t>();
  const int64_t* label = ctx.Input("Label").data<int64_t>();
  int64_t num_infer = 0, num_label = 0, num_correct = 0;
  std::vector<Chunk> inferred, labelled;
  for (int64_t s = 0; s < spans.size(); ++s) {
    const int64_t b = spans.begin[s], len = spans.length[s];
    ChunksOf(inference + b, len, scheme, other, &inferred);
    ChunksOf(label + b, len, scheme, other, &labelled);
    for (const Chunk& c : inferred) num_infer += counted(c);
    for (const Chunk& c : labelled) num_label += counted(c);
    // Both lists are in order and their chunks do not overlap: one merge pass finds the common ones.
    size_t i = 0, j = 0;
    while (i < inferred.size() && j < labelled.size()) {
      if (inferred[i] == labelled[j] && counted(inferred[i])) ++num_correct;
      const int64_t a = inferred[i].last, l = labelled[j].last;
      i += a <= l;
      j += l <= a;
    }
  }
  const float precision = num_infer ? static_cast<float>(num_correct) / static_cast<float>(num_infer) : 0.0f;
  const float recall = num_label ? static_cast<float>(num_correct) / static_cast<float>(num_label) : 0.0f;
  *ctx.Alloc<float>("Precision") = precision;
  *ctx.Alloc<float>("Recall") = recall;
  *ctx.Alloc<float>("F1-Score") = num_correct ? 2 * precision * recall / (precision + recall) : 0.0f;
  *ctx.Alloc<int64_t>("NumInferChunks") = num_infer;
  *ctx.Alloc<int64_t>("NumLabelChunks") = num_label;
  *ctx.Alloc<int64_t>("NumCorrectChunks") = num_correct;
};

}  // namespace

FL_REGISTER_OP(chunk_eval, op) {
  op.Doc(
        "Precision, recall and F1 of the chunks of Inference against those of Label, sequence by sequence (LoD, or "
        "padded [N, L] with SeqLength). An id is chunk_type * num_tag_types + tag_type (tag types per chunk_scheme: "
        "IOB: B 0, I 1; IOE: I 0, E 1; IOBES: B 0, I 1, E 2, S 3; plain: one), and num_chunk_types * num_tag_types "
        "is O. A chunk counts as correct when both have it with the same span and type.")
      .Input("Inference", "predicted tag ids, int64 [T, 1] (LoD) or [N, L] / [N, L, 1] (with SeqLength)")
      .Input("Label", "the true tag ids, Inference's shape and LoD")
      .DispensableInput("SeqLength", "int64 [N] or [N, 1]: each padded row's length (read when Label has no LoD)")
      .Output("Precision", "correct / inferred chunks, float32 [1] (0 when nothing was inferred)")
      .Output("Recall", "correct / labelled chunks, float32 [1] (0 when nothing is labelled)")
      .Output("F1-Score", "2 * Precision * Recall / (Precision + Recall), float32 [1] (0 when nothing is correct)")
      .Output("NumInferChunks", "chunks in Inference, int64 [1]")
      .Output("NumLabelChunks", "chunks in Label, int64 [1]")
      .Output("NumCorrectChunks", "chunks in both, int64 [1]")
      .RequiredAttr<int32_t>("num_chunk_types", 0, "the number of chunk types (O's chunk type is this number)")
      .Min(0)
      .Attr("chunk_scheme", "IOB", "the tagging scheme: IOB, IOE, IOBES or plain")
      .OneOf({"IOB", "IOE", "IOBES", "plain"})
      .Attr<std::vector<int32_t>>("excluded_chunk_types", {}, "chunk types not counted")
      .KernelDTypeFrom("Inference")
      .SetInferShape(ChunkEvalInferShape)
      .CPUKernel<int64_t>(kChunkEval);
}

}  // namespace fl
