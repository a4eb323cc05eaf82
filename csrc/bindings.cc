// The pybind11 module fluidlite._core: IR descs, scopes and tensors, the prepared executor, the op
// registry, logging and profiler controls. Python-facing conversions (numpy <-> Tensor, Python values
// <-> Attribute) live here and nowhere else.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <cstring>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include "allocator.h"
#include "executor.h"
#include "grad_op_maker.h"
#include "logging.h"
#include "op_builder.h"
#include "op_context.h"
#include "pool_policy.h"
#include "profiler.h"
#include "step_block_runner.h"
#include "thread_pool.h"

extern "C" void scipy_openblas_set_num_threads(int);
extern "C" int scipy_openblas_get_num_threads(void);
extern "C" char* scipy_openblas_get_corename(void);
extern "C" char* scipy_openblas_get_config(void);

// A LoDTensorArray is a Python object of its own (fluid.LoDTensorArray), not converted to a list.
PYBIND11_MAKE_OPAQUE(fl::TensorList)

namespace py = pybind11;
using namespace fl;

namespace {

py::list PassResultsToPython(const std::vector<PassResult>& results) {
  py::list l;
  for (auto& r : results)
    l.append(py::dict(py::arg("pass") = r.pass, py::arg("changes") = r.changes, py::arg("ops_before") = r.ops_before,
                      py::arg("ops_after") = r.ops_after, py::arg("details") = r.details,
                      py::arg("summary") = r.Summary()));
  return l;
}

}  // namespace

namespace {

unsigned long& MainThreadIdent() {  // Python's main thread (set at import)
  static unsigned long ident = 0;
  return ident;
}

// ------------------------------------------------------------------ numpy <-> Tensor

std::string PyTypeName(const py::handle& h) { return py::str(py::type::of(h).attr("__name__")); }

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

// numpy's kind character of a dtype's C++ type ('b' bool, 'f' floating, 'i' signed, 'u' unsigned).
template <typename T>
constexpr char NumpyKind() {
  if constexpr (std::is_same_v<T, bool>) return 'b';
  else if constexpr (std::is_same_v<T, Float16> || std::is_floating_point_v<T>) return 'f';
  else return std::is_signed_v<T> ? 'i' : 'u';
}

// By kind and item size, both read straight from the dtype (its `name` is a slow Python property).
DType DTypeFromNumpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const size_t size = static_cast<size_t>(dt.itemsize());
#define FL_DTYPE_FROM_NUMPY(n, v, type, fluid_name, cpp_name, format) \
  if (kind == NumpyKind<type>() && size == sizeof(type)) return DType::n;
  FL_FOR_EACH_DTYPE(FL_DTYPE_FROM_NUMPY)
#undef FL_DTYPE_FROM_NUMPY
  throw py::type_error("numpy dtype " + std::string(py::str(dt)) + " is not supported by fluidlite");
}

py::dtype NumpyDType(DType t) {
  switch (t) {
#define FL_NUMPY_DTYPE(n, v, type, fluid_name, cpp_name, format)               \
  case DType::n:                                                               \
    if constexpr (std::is_same_v<type, Float16>) return py::dtype(fluid_name); \
    else return py::dtype::of<type>();
    FL_FOR_EACH_DTYPE(FL_NUMPY_DTYPE)
#undef FL_NUMPY_DTYPE
    default: FL_THROW("tensor has no dtype (it was never written)");
  }
}

// Wraps a numpy array's memory without copying. A strided array (a slice, np.broadcast_to) or one in
// non-native byte order ('>f4' on x86) is first converted into a new C-contiguous native array, appended
// to `keep`: the caller holds `keep` for as long as the tensor is used (the tensor itself must not own a
// Python object: it dies without the GIL). `what` names the value in errors ("feed 'x'").
Tensor BorrowArray(const py::handle& obj, py::list& keep, const std::string& what) {
  py::array arr;
  if (py::isinstance<py::array>(obj)) {
    arr = py::reinterpret_borrow<py::array>(obj);
    if (!(arr.flags() & py::array::c_style)) {
      // A zero-stride view of a few bytes can stand for 32 GiB: copy it only if that fits easily.
      const double bytes = static_cast<double>(arr.size()) * static_cast<double>(arr.itemsize());
      const double limit = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) / 4;
      if (bytes > limit)
        throw py::value_error(Str(what, " is a non-contiguous ", std::string(py::str(arr.dtype())), " array of shape ",
                                  std::string(py::str(obj.attr("shape"))), ": its contiguous copy would take ",
                                  bytes / (1 << 20),
                                  " MiB, over a quarter of this machine's memory; feed a smaller or "
                                  "contiguous array (np.ascontiguousarray)"));
      arr = py::array::ensure(obj, py::array::c_style);
      if (!arr) throw py::error_already_set();
    }
  } else {
    arr = py::array::ensure(obj, py::array::c_style);
    if (!arr) throw py::type_error(Str(what, " must be a numpy array (or convertible to one), got ", PyTypeName(obj)));
  }
  if (arr.dtype().kind() == 'O')  // Fluid's hint: ragged nested lists make an object array
    throw py::type_error(Str(what,
                             " is an array of Python objects (dtype object), not a regular ndarray: usually "
                             "it was made from nested lists of different lengths. Please consider using "
                             "'fluid.create_lod_tensor' to convert it to a LoD-Tensor."));
  const char order = py::detail::array_descriptor_proxy(arr.dtype().ptr())->byteorder;
  constexpr char kSwapped = kLittleEndian ? '>' : '<';
  if (order == kSwapped) arr = arr.attr("astype")(arr.dtype().attr("newbyteorder")("="));
  keep.append(arr);
  Tensor t;
  std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
  t.Resize(DDim(dims));
  auto holder = std::make_shared<Allocation>(const_cast<void*>(arr.data()), arr.nbytes(), Place::CPU(), nullptr);
  t.ResetHolder(holder, 0, DTypeFromNumpy(arr.dtype()), Place::CPU());
  return t;
}

// A numpy array that shares the tensor's buffer; the capsule keeps the buffer alive.
py::array ShareToNumpy(const Tensor& t) {
  FL_ENFORCE(t.IsInitialized(), "tensor holds no memory (it was never written)");
  if (t.place().is_gpu()) {  // a fetch from a GPU: one device-to-host copy (memcpy:GPU->CPU), then a view of it
    Tensor host;
    TensorCopy(t, Place::CPU(), &host);
    host.set_lod(t.lod());
    return ShareToNumpy(host);
  }
  auto* keep = new std::shared_ptr<Allocation>(t.holder());
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Allocation>*>(p); });
  std::vector<py::ssize_t> shape(t.dims().begin(), t.dims().end());
  return py::array(NumpyDType(t.dtype()), shape, t.raw_data(), owner);
}

// Copies a numpy array into a tensor on `place` (Tensor.set). The LoD stays, as in Fluid (LoDTensor(lengths) or
// set_recursive_sequence_lengths may come first); has_valid_recursive_sequence_lengths tells whether it fits.
void SetFromNumpy(Tensor& t, const py::handle& obj, const Place& place) {
  py::list keep;
  Tensor src = BorrowArray(obj, keep, "LoDTensor.set: array");
  const LoD lod = t.lod();
  TensorCopy(src, place, &t);
  t.set_lod(lod);
}

// The ndarray subclass that fetched arrays of rank >= 1 are returned as (set by the executor:
// fluidlite/numpy_compat.py says why), or null for plain arrays.
PyObject*& ScalarArrayType() {
  static PyObject* type = nullptr;  // a strong reference, never released (types outlive the module anyway)
  return type;
}

py::object FetchedArray(const Tensor& t) {
  py::array a = ShareToNumpy(t);
  if (ScalarArrayType() == nullptr || t.rank() == 0) return std::move(a);
  PyObject* view = py::detail::npy_api::get().PyArray_View_(a.ptr(), nullptr, ScalarArrayType());
  if (!view) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(view);
}

// Fluid 1.8's as_numpy on a fetched tensor that holds a LoD (return_numpy=True): a RuntimeError, in its words (the
// runs of spaces are its source's line continuations).
constexpr const char* kFetchedLoDMessage =
    "Some of your fetched tensors hold LoD information.             They can not be completely cast to Python "
    "ndarray.             Please set the parameter 'return_numpy' as 'False' to             return LoDTensor "
    "itself directly.";

// A fetched value as Fluid 1.8's Executor.run returns it: a LoDTensor (return_numpy=False) or an array; a
// LoDTensorArray as a fluid.LoDTensorArray, or (return_numpy=True, its as_numpy) a list with one array per entry (None
// for an entry never written).
py::object FetchedValue(FetchValue& v, bool return_numpy) {
  if (Tensor* t = std::get_if<Tensor>(&v)) {
    if (!return_numpy) return py::cast(std::move(*t));
    if (!t->lod().empty()) throw std::runtime_error(kFetchedLoDMessage);
    return FetchedArray(*t);
  }
  TensorList& array = std::get<TensorList>(v);
  if (!return_numpy) return py::cast(std::move(array));
  py::list entries;
  for (const Tensor& t : array) {
    if (!t.lod().empty()) throw std::runtime_error(kFetchedLoDMessage);
    entries.append(t.IsInitialized() ? FetchedArray(t) : py::none());
  }
  return std::move(entries);
}

// Python's index rules on a LoDTensorArray (negative counts from the end): the position, or IndexError.
size_t ArrayPosition(const TensorList& a, py::ssize_t i) {
  const py::ssize_t n = static_cast<py::ssize_t>(a.size());
  const py::ssize_t k = i < 0 ? i + n : i;
  if (k < 0 || k >= n) throw py::index_error(Str("LoDTensorArray index ", i, " out of range (length ", n, ")"));
  return static_cast<size_t>(k);
}

// Tensor.set_lod / set_recursive_sequence_lengths: a malformed LoD raises ValueError naming it. As Fluid 1.8's
// CheckLoD(lod, dims[0]): on a tensor holding rows the last level must end at its row count; on one not set yet (or
// with 0 rows) only the structure is checked. `given` describes the argument ("LoD [[0, 2, 5]]").
void SetCheckedLoD(Tensor& t, const LoD& lod, const char* method, const std::string& given) {
  const int64_t rows = t.IsInitialized() && t.rank() > 0 && t.dims()[0] > 0 ? t.dims()[0] : -1;
  std::string problem = LoDProblem(lod, rows);
  if (!problem.empty()) throw py::value_error(Str("LoDTensor.", method, ": invalid ", given, ": ", problem));
  t.set_lod(lod);
}

// Fluid's operator<< of a LoDTensor (what print(tensor) shows): the LoD if any, place, shape, layout, dtype, data.
std::string TensorSummary(const Tensor& t) {
  std::ostringstream os;
  if (!t.lod().empty()) os << "  - lod: " << t.LoDString() << "\n";
  os << "  - place: " << t.place().ToString() << "\n";
  os << "  - shape: " << t.dims().ToString() << "\n";
  os << "  - layout: NCHW\n";
  if (!t.IsInitialized()) return os.str();
  os << "  - dtype: " << DTypeCppName(t.dtype()) << "\n";
  os << "  - data: [";
  if (t.place().is_cpu() && t.dtype() != DType::FP16)
    VisitDType(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i) os << " ";
        if constexpr (sizeof(T) == 1 && !std::is_same_v<T, bool>) os << static_cast<int>(p[i]);
        else os << p[i];
      }
    });
  os << "]";
  return os.str();
}

// Where levels of Python ints hold a negative entry ("level 0 has the negative value -1 at position 1"), or "".
std::string NegativeEntry(const std::vector<std::vector<int64_t>>& levels) {
  for (size_t l = 0; l < levels.size(); ++l)
    for (size_t i = 0; i < levels[l].size(); ++i)
      if (levels[l][i] < 0) return Str("level ", l, " has the negative value ", levels[l][i], " at position ", i);
  return "";
}

LoD ToLoD(const std::vector<std::vector<int64_t>>& levels) {
  LoD out(levels.size());
  for (size_t l = 0; l < levels.size(); ++l) out[l].assign(levels[l].begin(), levels[l].end());
  return out;
}

// LoD offsets or lengths from Python ints: a negative entry is a ValueError naming it (pybind's size_t
// conversion would give a TypeError listing signatures instead).
LoD NonNegativeLevels(const std::vector<std::vector<int64_t>>& levels, const char* method, const char* what) {
  const std::string negative = NegativeEntry(levels);
  if (!negative.empty())
    throw py::value_error(
        Str("LoDTensor.", method, ": invalid ", what, " ", std::string(py::repr(py::cast(levels))), ": ", negative));
  return ToLoD(levels);
}

// Why LoD offsets (lengths, with `lengths`) from Python do not fit a tensor of `rows` rows (rows < 0: the structure
// only), or "": core.lod_problem / core.lengths_problem, for the Python code that checks a LoD before building or
// setting it (create_lod_tensor, DataFeeder, the tensor file reader) and words its own error.
std::string LevelsProblem(const std::vector<std::vector<int64_t>>& levels, int64_t rows, bool lengths) {
  const std::string negative = NegativeEntry(levels);
  if (!negative.empty()) return negative;
  return LoDProblem(lengths ? LengthsToOffsets(ToLoD(levels)) : ToLoD(levels), rows);
}

// A fed value: a LoDTensor is shared as it is (its LoD included), anything else is borrowed as an array.
Tensor FeedTensor(const py::handle& obj, py::list& keep, const std::string& what) {
  if (py::isinstance<Tensor>(obj)) {
    const Tensor& t = obj.cast<const Tensor&>();
    if (!t.IsInitialized()) throw py::value_error(what + " is a LoDTensor that holds no data (call set() first)");
    return t;  // shares the buffer (ref-counted), copies the LoD
  }
  return BorrowArray(obj, keep, what);
}

// ------------------------------------------------------------------ Python <-> Attribute

bool IsInt(const py::handle& h) {
  if (py::isinstance<py::bool_>(h)) return false;
  if (py::isinstance<py::int_>(h)) return true;
  if (py::hasattr(h, "dtype")) return std::string(py::str(h.attr("dtype").attr("kind"))) == "i";  // numpy scalars
  return py::hasattr(h, "__index__") && !py::isinstance<py::float_>(h);
}
bool IsNumber(const py::handle& h) {
  return IsInt(h) || py::isinstance<py::float_>(h) ||
         (py::hasattr(h, "dtype") && std::string(py::str(h.attr("dtype").attr("kind"))) == "f");
}
bool IsBool(const py::handle& h) {
  return py::isinstance<py::bool_>(h) ||
         (py::hasattr(h, "dtype") && std::string(py::str(h.attr("dtype").attr("kind"))) == "b");
}

[[noreturn]] void AttrTypeError(const std::string& op, const std::string& name, AttrType want, const py::handle& got) {
  throw py::type_error("op " + op + ": attribute '" + name + "' expects " + AttrTypeName(want) + ", got " +
                       PyTypeName(got) + " " + std::string(py::repr(got)));
}

template <typename T, typename Check, typename Conv>
std::vector<T> ToList(const std::string& op, const std::string& name, AttrType want, const py::handle& h, Check check,
                      Conv conv) {
  if (!py::isinstance<py::list>(h) && !py::isinstance<py::tuple>(h)) AttrTypeError(op, name, want, h);
  std::vector<T> r;
  for (auto item : h) {
    if (!check(item)) AttrTypeError(op, name, want, h);
    r.push_back(conv(item));
  }
  return r;
}

int32_t BlockIndexOf(const py::handle& h) {
  if (py::hasattr(h, "idx")) return h.attr("idx").cast<int32_t>();
  return h.cast<int32_t>();
}

// A Python int as int64 (ValueError naming the op and attribute when it does not fit: never truncated).
int64_t ToInt64(const std::string& op, const std::string& name, const py::handle& x) {
  PyObject* index = PyNumber_Index(x.ptr());
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (overflow || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    throw py::value_error("op " + op + ": attribute '" + name + "' value " + std::string(py::str(x)) +
                          " does not fit a 64-bit integer");
  }
  return v;
}

// The same for an INT or an element of INTS: Fluid stores them as int32.
int32_t ToInt32(const std::string& op, const std::string& name, const py::handle& x, const py::handle& whole) {
  const int64_t v = ToInt64(op, name, x);
  if (v < INT32_MIN || v > INT32_MAX)
    throw py::value_error("op " + op + ": attribute '" + name + "' value " + std::to_string(v) +
                          (whole.ptr() == x.ptr() ? "" : " (in " + std::string(py::repr(whole)) + ")") +
                          " does not fit a 32-bit integer (INT" + (whole.ptr() == x.ptr() ? "" : "S") + " attribute)");
  return static_cast<int32_t>(v);
}

Attribute ToAttribute(const std::string& op, const std::string& name, AttrType want, const py::handle& h) {
  auto as_i64 = [&](py::handle x) { return ToInt64(op, name, x); };
  auto as_f = [](py::handle x) { return x.cast<double>(); };
  switch (want) {
    case AttrType::INT:
      if (!IsInt(h) && !IsBool(h)) AttrTypeError(op, name, want, h);
      return ToInt32(op, name, h, h);
    case AttrType::LONG:
      if (!IsInt(h)) AttrTypeError(op, name, want, h);
      return as_i64(h);
    case AttrType::FLOAT:
      if (!IsNumber(h) || IsBool(h)) AttrTypeError(op, name, want, h);
      return static_cast<float>(as_f(h));
    case AttrType::STRING:
      if (!py::isinstance<py::str>(h)) AttrTypeError(op, name, want, h);
      return h.cast<std::string>();
    case AttrType::BOOLEAN:
      if (!IsBool(h) && !(IsInt(h) && (as_i64(h) == 0 || as_i64(h) == 1))) AttrTypeError(op, name, want, h);
      return PyObject_IsTrue(h.ptr()) == 1;
    case AttrType::INTS:
      return ToList<int32_t>(op, name, want, h, IsInt, [&](py::handle x) { return ToInt32(op, name, x, h); });
    case AttrType::LONGS: return ToList<int64_t>(op, name, want, h, IsInt, as_i64);
    case AttrType::FLOATS:
      return ToList<float>(op, name, want, h, IsNumber, [&](py::handle x) { return static_cast<float>(as_f(x)); });
    case AttrType::STRINGS:
      return ToList<std::string>(
          op, name, want, h, [](py::handle x) { return py::isinstance<py::str>(x); },
          [](py::handle x) { return x.cast<std::string>(); });
    case AttrType::BOOLEANS:
      return ToList<bool>(op, name, want, h, IsBool, [](py::handle x) { return PyObject_IsTrue(x.ptr()) == 1; });
    case AttrType::BLOCK: return BlockRef{BlockIndexOf(h)};
    case AttrType::BLOCKS: {
      std::vector<BlockRef> r;
      for (auto item : h) r.push_back(BlockRef{BlockIndexOf(item)});
      return r;
    }
  }
  AttrTypeError(op, name, want, h);
}

// Type of an attribute nobody declared, guessed from the value.
AttrType GuessAttrType(const py::handle& h) {
  if (IsBool(h)) return AttrType::BOOLEAN;
  if (IsInt(h)) return AttrType::INT;
  if (IsNumber(h)) return AttrType::FLOAT;
  if (py::isinstance<py::str>(h)) return AttrType::STRING;
  if (py::hasattr(h, "idx") && py::hasattr(h, "program")) return AttrType::BLOCK;
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    py::sequence s = py::reinterpret_borrow<py::sequence>(h);
    if (s.size() == 0) return AttrType::INTS;
    py::handle first = s[0];
    if (IsBool(first)) return AttrType::BOOLEANS;
    if (IsInt(first)) {
      for (auto x : s)
        if (!IsInt(x)) return AttrType::FLOATS;
      return AttrType::INTS;
    }
    if (IsNumber(first)) return AttrType::FLOATS;
    if (py::isinstance<py::str>(first)) return AttrType::STRINGS;
    if (py::hasattr(first, "idx")) return AttrType::BLOCKS;
  }
  throw py::type_error("cannot store a " + PyTypeName(h) + " as an op attribute");
}

AttrType DeclaredAttrType(const std::string& op, const std::string& name, const py::handle& value) {
  if (const OpInfo* info = OpRegistry::Instance().Find(op))
    if (const AttrSpec* s = info->FindAttr(name)) return s->type();
  for (auto& s : CommonAttrs())
    if (s.name == name) return s.type();
  return GuessAttrType(value);
}

py::object FromAttribute(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> py::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, BlockRef>) return py::int_(v.idx);
        else if constexpr (std::is_same_v<T, std::vector<BlockRef>>) {
          py::list l;
          for (auto& b : v) l.append(b.idx);
          return l;
        } else return py::cast(v);
      },
      a);
}

VarNameMap ToVarNameMap(const py::dict& d) {
  VarNameMap m;
  for (auto kv : d) {
    std::vector<std::string> args;
    if (py::isinstance<py::str>(kv.second)) args.push_back(kv.second.cast<std::string>());
    else
      for (auto a : kv.second) args.push_back(a.cast<std::string>());
    m.emplace_back(kv.first.cast<std::string>(), std::move(args));
  }
  return m;
}

py::dict FromVarNameMap(const VarNameMap& m) {
  py::dict d;
  for (auto& kv : m) d[py::str(kv.first)] = py::cast(kv.second);
  return d;
}

std::map<std::string, Attribute> ToAttrMap(const std::string& op, const py::dict& attrs) {
  std::map<std::string, Attribute> r;
  for (auto kv : attrs) {
    if (kv.second.is_none()) continue;
    std::string name = kv.first.cast<std::string>();
    r[name] = ToAttribute(op, name, DeclaredAttrType(op, name, kv.second), kv.second);
  }
  return r;
}

py::dict ProtoDict(const OpInfo& info) {
  py::dict d;
  d["type"] = info.type;
  d["doc"] = info.doc;
  auto slots = [](const std::vector<SlotSpec>& v) {
    py::list l;
    for (auto& s : v) {
      py::dict e;
      e["name"] = s.name;
      e["doc"] = s.doc;
      e["duplicable"] = s.duplicable;
      e["dispensable"] = s.dispensable;
      l.append(e);
    }
    return l;
  };
  d["inputs"] = slots(info.inputs);
  d["outputs"] = slots(info.outputs);
  py::list attrs;
  for (auto& a : info.attrs) {
    py::dict e;
    e["name"] = a.name;
    e["type"] = AttrTypeName(a.type());
    e["default"] = a.required ? py::object(py::none()) : FromAttribute(a.default_value);
    e["doc"] = a.doc;
    e["required"] = a.required;
    e["constraint"] = a.constraint;  // the valid values beyond the type ("each >= 1; 2 values"), or ""
    attrs.append(e);
  }
  d["attrs"] = attrs;
  d["has_kernel"] = info.HasAnyKernel();
  d["kernels"] = info.KernelListString();
  d["has_grad"] = info.differentiable();
  d["grad"] = GradKindName(info.grad_kind);  // composed, grad_op, no_gradient or none
  d["grad_op"] = info.grad_op;               // the generated grad op's type ("" unless grad == grad_op)
  d["forward_op"] = info.forward ? info.forward->type : std::string();  // on a generated grad op
  py::list inplace;  // [[out, in]]: the output slots that may be their input's variable
  for (auto& p : info.inplace) inplace.append(py::make_tuple(p.first, p.second));
  d["inplace"] = inplace;
  return d;
}

py::dict StatsDict(const MemoryStats& s) {
  py::dict d;
  d["bytes_in_use"] = s.bytes_in_use;
  d["peak_bytes"] = s.peak_bytes;
  d["num_allocs"] = s.num_allocs;
  d["num_frees"] = s.num_frees;
  d["bytes_cached"] = s.bytes_cached;
  d["num_system_allocs"] = s.num_system_allocs;
  return d;
}

}  // namespace

namespace fl {
void BindComm(py::module_& m);    // comm_bindings.cc
void BindDevice(py::module_& m);  // device_bindings.cc
}  // namespace fl

PYBIND11_MODULE(_core, m) {
  m.doc() = "fluidlite C++ core";
  MainThreadIdent() = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  InitLoggingFromEnv();
  OpRegistry::Instance().Finalize();

  static py::exception<EnforceNotMet> enforce_exc(m, "EnforceNotMet", PyExc_RuntimeError);
  // A feed that does not fit its fluid.data declaration: Fluid raises ValueError there, and scripts catch
  // either that or EnforceNotMet.
  static py::handle feed_exc = PyErr_NewExceptionWithDoc(
      "fluidlite._core.FeedError", "a fed value does not match its fluid.data declaration (shape or dtype)",
      py::make_tuple(enforce_exc, py::handle(PyExc_ValueError)).release().ptr(), nullptr);
  if (!feed_exc) throw py::error_already_set();
  m.attr("FeedError") = feed_exc;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FeedError& e) {
      PyErr_SetString(feed_exc.ptr(), e.what());
    } catch (const EnforceNotMet& e) {
      py::set_error(enforce_exc, e.what());
    }
  });

  // ---------------------------------------------------------------- places
  py::class_<Place>(m, "Place")
      .def("is_cpu_place", &Place::is_cpu)
      .def("is_gpu_place", &Place::is_gpu)
      .def("is_cuda_pinned_place", &Place::is_pinned)
      .def("gpu_device_id", [](const Place& p) { return p.device; })
      .def("__eq__", [](const Place& a, const Place& b) { return a == b; })
      .def("__repr__", &Place::ToString)
      .def("__str__", &Place::ToString);
  m.def("cpu_place", &Place::CPU);
  m.def("cuda_place", &Place::CUDA);

  // ---------------------------------------------------------------- tensors and scopes
  py::class_<Tensor>(m, "LoDTensor", py::buffer_protocol())
      .def(py::init<>())
      .def(py::init([](const std::vector<std::vector<int64_t>>& lengths) {
             // Fluid's LoDTensor(recursive_sequence_lengths): an empty tensor with that LoD (structure checked)
             Tensor t;
             LoD lod = LengthsToOffsets(NonNegativeLevels(lengths, "__init__", "recursive_sequence_lengths"));
             SetCheckedLoD(t, lod, "__init__",
                           Str("recursive_sequence_lengths ", std::string(py::repr(py::cast(lengths)))));
             return t;
           }),
           py::arg("recursive_sequence_lengths"))
      .def_buffer([](Tensor& t) -> py::buffer_info {
        FL_ENFORCE(t.IsInitialized(), "tensor holds no memory (it was never written)");
        FL_ENFORCE(t.place().is_host(), "tensor lives on ", t.place().ToString(),
                   "; np.array(tensor) copies it to the host (or share it with __dlpack__)");
        std::vector<py::ssize_t> shape(t.dims().begin(), t.dims().end()), strides(shape.size());
        py::ssize_t s = static_cast<py::ssize_t>(SizeOf(t.dtype()));
        for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
          strides[i] = s;
          s *= shape[i];
        }
        return py::buffer_info(t.raw_mutable(), static_cast<py::ssize_t>(SizeOf(t.dtype())), DTypeFormat(t.dtype()),
                               static_cast<py::ssize_t>(shape.size()), shape, strides);
      })
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype, py::object copy) {
            py::array a = ShareToNumpy(t).attr("copy")();
            return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("shape", [](const Tensor& t) { return t.dims().ToVector(); })
      .def("_dtype", [](const Tensor& t) { return static_cast<int>(t.dtype()); })
      .def("_is_initialized", &Tensor::IsInitialized)
      .def("_place", &Tensor::place)
      .def(
          "set", [](Tensor& t, py::handle arr, const Place& place) { SetFromNumpy(t, arr, place); }, py::arg("array"),
          py::arg("place") = Place::CPU())
      .def("_share_numpy", &ShareToNumpy, "numpy view sharing this tensor's buffer (kept alive by the view)")
      // LoD as offsets (lod/set_lod) or as lengths (recursive_sequence_lengths); the setters check the
      // structure only, as Fluid's: the rows are checked by has_valid_recursive_sequence_lengths.
      .def("lod", [](const Tensor& t) { return t.lod(); })
      .def(
          "set_lod",
          [](Tensor& t, const std::vector<std::vector<int64_t>>& offsets) {
            LoD l = NonNegativeLevels(offsets, "set_lod", "LoD");
            SetCheckedLoD(t, l, "set_lod", "LoD " + std::string(py::repr(py::cast(l))));
          },
          py::arg("lod"))
      .def("recursive_sequence_lengths", [](const Tensor& t) { return OffsetsToLengths(t.lod()); })
      .def(
          "set_recursive_sequence_lengths",
          [](Tensor& t, const std::vector<std::vector<int64_t>>& lengths) {
            LoD lens = NonNegativeLevels(lengths, "set_recursive_sequence_lengths", "recursive_sequence_lengths");
            LoD lod = LengthsToOffsets(lens);
            SetCheckedLoD(t, lod, "set_recursive_sequence_lengths",
                          Str("recursive_sequence_lengths ", std::string(py::repr(py::cast(lens))), " (offsets ",
                              std::string(py::repr(py::cast(lod))), ")"));
          },
          py::arg("recursive_sequence_lengths"))
      .def("has_valid_recursive_sequence_lengths",
           [](const Tensor& t) { return LoDProblem(t.lod(), t.rank() ? t.dims()[0] : 0).empty(); })
      .def(
          "_lod_problem", [](const Tensor& t) { return LoDProblem(t.lod(), t.rank() ? t.dims()[0] : 0); },
          "why the LoD does not fit this tensor, or ''")
      .def("__str__", &TensorSummary)
      .def("__repr__", [](const Tensor& t) {
        return "LoDTensor(" + std::string(DTypeName(t.dtype())) + ", " + t.dims().ToString() + ", " +
               t.place().ToString() + (t.lod().empty() ? "" : ", lod " + t.LoDString()) + ")";
      });

  // Fluid's SelectedRows (a sparse gradient): rows of a [height, ...] tensor, value [len(rows), ...].
  py::class_<SelectedRows>(m, "SelectedRows")
      .def(py::init<>())
      .def(py::init([](std::vector<int64_t> rows, int64_t height) {
             SelectedRows sr;
             sr.rows = std::move(rows);
             sr.height = height;
             return sr;
           }),
           py::arg("rows"), py::arg("height"))
      .def("rows", [](const SelectedRows& sr) { return sr.rows; })
      .def("set_rows", [](SelectedRows& sr, std::vector<int64_t> rows) { sr.rows = std::move(rows); })
      .def("height", [](const SelectedRows& sr) { return sr.height; })
      .def("set_height", [](SelectedRows& sr, int64_t h) { sr.height = h; })
      .def(
          "get_tensor", [](SelectedRows& sr) -> Tensor& { return sr.value; },
          py::return_value_policy::reference_internal, "the value tensor [len(rows), ...]")
      .def("__repr__", [](const SelectedRows& sr) {
        return Str("SelectedRows(height ", sr.height, ", ", sr.rows.size(), " rows, value ",
                   DTypeName(sr.value.dtype()), " ", sr.value.dims(), ")");
      });

  // Fluid's LoDTensorArray: a list of LoDTensors (append, len, indexing, iteration). Entries are returned as
  // tensors sharing the entry's buffer, not as references into the list (an append may move the list's storage).
  py::class_<TensorList>(m, "LoDTensorArray")
      .def(py::init<>())
      .def("__len__", [](const TensorList& a) { return a.size(); })
      .def(
          "__getitem__", [](const TensorList& a, py::ssize_t i) { return a[ArrayPosition(a, i)]; }, py::arg("i"))
      .def(
          "__setitem__", [](TensorList& a, py::ssize_t i, const Tensor& t) { a[ArrayPosition(a, i)] = t; },
          py::arg("i"), py::arg("tensor"))
      .def(
          "append", [](TensorList& a, const Tensor& t) { a.push_back(t); }, py::arg("tensor"),
          "appends a LoDTensor (sharing its buffer and LoD)")
      .def("_move_to_list",
           [](TensorList& a) {
             py::list r;
             for (auto& t : a) r.append(py::cast(std::move(t)));
             a.clear();
             return r;
           })
      .def("__repr__", [](const TensorList& a) { return Str("LoDTensorArray(", a.size(), " entries)"); });

  // Fluid's LodRankTable (layers.lod_rank_table): items() = [(index, length), ...], longest first.
  py::class_<LoDRankTable>(m, "LodRankTable")
      .def("items",
           [](const LoDRankTable& t) {
             std::vector<std::pair<size_t, size_t>> r;
             for (const auto& item : t.items) r.emplace_back(item.index, item.length);
             return r;
           })
      .def(
          "level", [](const LoDRankTable& t) { return t.coarse_lod.size(); }, "the LoD level ranked")
      .def(
          "coarse_lod", [](const LoDRankTable& t) { return t.coarse_lod; }, "the levels above it, as offsets")
      .def("__repr__", [](const LoDRankTable& t) {
        return Str("LodRankTable(level ", t.coarse_lod.size(), ", ", t.items.size(), " sequences)");
      });

  py::class_<Variable, std::shared_ptr<Variable>>(m, "Variable")
      .def("get_tensor", &Variable::GetMutableTensor, py::return_value_policy::reference_internal)
      .def("get_lod_tensor_array", &Variable::GetMutableTensorList, py::return_value_policy::reference_internal)
      .def("get_lod_rank_table", &Variable::GetMutableRankTable, py::return_value_policy::reference_internal)
      .def("get_selected_rows", &Variable::GetMutableSelectedRows, py::return_value_policy::reference_internal)
      .def("is_initialized", &Variable::IsInitialized)
      .def("kind", &Variable::KindName);

  // A Python handle to a kid scope outlives the kid when the parent drops its kids: every method
  // checks the scope is still alive (a stale handle raises instead of touching freed memory).
  auto live = [](Scope& s) -> Scope& {
    FL_ENFORCE(Scope::IsAlive(&s), "this scope was deleted (its parent called drop_kids()); create a new one");
    return s;
  };
  py::class_<Scope>(m, "Scope")
      .def(py::init<>())
      // Handles share ownership of the variable: they outlive erase_vars() and drop_kids() safely.
      .def("var", [live](Scope& s, const std::string& n) { return live(s).Var(n)->shared_from_this(); })
      .def("find_var",
           [live](Scope& s, const std::string& n) {
             Variable* v = live(s).FindVar(n);
             return v ? v->shared_from_this() : std::shared_ptr<Variable>();
           })
      .def(
          "find_local_var", [live](Scope& s, const std::string& n) { return live(s).FindLocalVar(n); },
          py::return_value_policy::reference_internal)
      .def(
          "new_scope", [live](Scope& s) { return &live(s).NewScope(); }, py::return_value_policy::reference_internal)
      .def("drop_kids", [live](Scope& s) { live(s).DropKids(); })
      .def("erase_vars", [live](Scope& s, const std::vector<std::string>& n) { live(s).EraseVars(n); })
      .def("local_var_names", [live](Scope& s) { return live(s).LocalVarNames(); })
      .def("num_kids", [live](Scope& s) { return live(s).NumKids(); });
  m.def(
      "lod_problem",
      [](const std::vector<std::vector<int64_t>>& offsets, int64_t rows) {
        return LevelsProblem(offsets, rows, false);
      },
      py::arg("lod"), py::arg("rows"), "why LoD offsets do not fit a tensor of `rows` rows (-1: any), or ''");
  m.def(
      "lengths_problem",
      [](const std::vector<std::vector<int64_t>>& lengths, int64_t rows) { return LevelsProblem(lengths, rows, true); },
      py::arg("recursive_sequence_lengths"), py::arg("rows"),
      "why recursive sequence lengths do not fit a tensor of `rows` rows (-1: any), or ''");
  m.def("live_scopes", &Scope::LiveScopes, "number of kid scopes alive in the process");

  // ---------------------------------------------------------------- IR
  py::class_<VarDesc, std::shared_ptr<VarDesc>>(m, "VarDesc")
      .def("name", &VarDesc::name)
      .def("dtype", [](const VarDesc& v) { return static_cast<int>(v.dtype()); })
      .def("set_dtype", [](VarDesc& v, int t) { v.set_dtype(static_cast<DType>(t)); })
      .def("shape", &VarDesc::shape)
      .def("set_shape", &VarDesc::set_shape)
      .def("type", [](const VarDesc& v) { return static_cast<int>(v.kind()); })
      .def("set_type", [](VarDesc& v, int k) { v.set_kind(static_cast<VarKind>(k)); })
      .def("persistable", &VarDesc::persistable)
      .def("set_persistable", &VarDesc::set_persistable)
      .def("lod_level", &VarDesc::lod_level)
      .def("set_lod_level", &VarDesc::set_lod_level)
      .def("is_data", &VarDesc::is_data)
      .def("set_is_data", &VarDesc::set_is_data)
      .def("need_check_feed", &VarDesc::need_check_feed)
      .def("set_need_check_feed", &VarDesc::set_need_check_feed)
      .def("id", &VarDesc::id, "process-unique id of this desc object (never reused)");

  py::class_<OpDesc, std::shared_ptr<OpDesc>>(m, "OpDesc")
      .def(py::init<std::string>())
      .def("type", &OpDesc::type)
      .def("id", &OpDesc::id, "process-unique id of this desc object (never reused)")
      .def("set_type", &OpDesc::set_type)
      .def("inputs", [](const OpDesc& o) { return FromVarNameMap(o.inputs()); })
      .def("outputs", [](const OpDesc& o) { return FromVarNameMap(o.outputs()); })
      .def("input_names",
           [](const OpDesc& o) {
             std::vector<std::string> r;
             for (auto& kv : o.inputs()) r.push_back(kv.first);
             return r;
           })
      .def("output_names",
           [](const OpDesc& o) {
             std::vector<std::string> r;
             for (auto& kv : o.outputs()) r.push_back(kv.first);
             return r;
           })
      .def("input", &OpDesc::Input)
      .def("output", &OpDesc::Output)
      .def("set_input", &OpDesc::SetInput)
      .def("set_output", &OpDesc::SetOutput)
      .def("input_arg_names", &OpDesc::InputArgumentNames)
      .def("output_arg_names", &OpDesc::OutputArgumentNames)
      .def("rename_input", &OpDesc::RenameInput)
      .def("rename_output", &OpDesc::RenameOutput)
      .def("has_attr", &OpDesc::HasAttr)
      .def("attr", [](const OpDesc& o, const std::string& n) { return FromAttribute(o.GetAttr(n)); })
      .def("attr_type", [](const OpDesc& o, const std::string& n) { return static_cast<int>(TypeOf(o.GetAttr(n))); })
      .def("attr_names",
           [](const OpDesc& o) {
             std::vector<std::string> r;
             for (auto& kv : o.attrs()) r.push_back(kv.first);
             return r;
           })
      .def("set_attr",
           [](OpDesc& o, const std::string& n, py::handle v) {
             o.SetAttr(n, ToAttribute(o.type(), n, DeclaredAttrType(o.type(), n, v), v));
           })
      .def("remove_attr", &OpDesc::RemoveAttr)
      .def("creation_site", &OpDesc::CreationSite)
      .def("copy", [](const OpDesc& o) {
        OpDesc c(o);
        c.SetOwner(nullptr);
        return c;
      });

  py::class_<BlockDesc>(m, "BlockDesc")
      .def_property_readonly("id", &BlockDesc::idx)
      .def_property_readonly("parent", &BlockDesc::parent_idx)
      .def("get_forward_block_idx", &BlockDesc::forward_block_idx)
      .def("set_forward_block_idx", &BlockDesc::set_forward_block_idx)
      .def("var", &BlockDesc::Var, py::return_value_policy::reference_internal)
      .def("find_var", &BlockDesc::FindVar, py::return_value_policy::reference_internal)
      .def("find_var_recursive", &BlockDesc::FindVarRecursive, py::return_value_policy::reference_internal)
      .def("has_var", &BlockDesc::HasVar)
      .def("remove_var", &BlockDesc::RemoveVar)
      .def(
          "var_id",
          [](const BlockDesc& b, const std::string& name) {
            const VarDesc* v = b.FindVar(name);
            return v ? v->id() : uint64_t{0};
          },
          "id() of the local variable `name`, 0 if the block has none")
      .def(
          "var_ids",
          [](const BlockDesc& b) {
            std::vector<uint64_t> r;
            for (auto& v : b.AllVars()) r.push_back(v->id());
            return r;
          },
          "id() of every variable, in creation order")
      .def(
          "var_names",
          [](const BlockDesc& b) {
            std::vector<std::string> r;
            for (auto& v : b.AllVars()) r.push_back(v->name());
            return r;
          },
          "name of every variable, in creation order")
      .def(
          "op_ids",
          [](const BlockDesc& b) {
            std::vector<uint64_t> r;
            for (auto& o : b.AllOps()) r.push_back(o->id());
            return r;
          },
          "id() of every op, in order")
      .def("vars_version", &BlockDesc::vars_version, "bumped when a variable is added or removed")
      .def("ops_version", &BlockDesc::ops_version, "bumped when an op is inserted or removed")
      .def(
          "all_vars",
          [](const BlockDesc& b) {
            std::vector<VarDesc*> r;
            for (auto& v : b.AllVars()) r.push_back(v.get());
            return r;
          },
          py::return_value_policy::reference_internal)
      .def("op_size", &BlockDesc::OpSize)
      .def("op", &BlockDesc::Op, py::return_value_policy::reference_internal)
      .def("remove_op", &BlockDesc::RemoveOp)
      .def(
          "append_op",
          [](BlockDesc& b, const std::string& type, const py::dict& ins, const py::dict& outs, const py::dict& attrs,
             int index) {
            std::map<std::string, Attribute> converted;
            try {
              converted = ToAttrMap(type, attrs);
            } catch (py::builtin_exception& e) {  // TypeError/ValueError: add the user's file:line
              OpDesc probe(type);
              if (attrs.contains("op_callstack"))
                probe.SetAttr("op_callstack",
                              ToAttribute(type, "op_callstack", AttrType::STRINGS, attrs["op_callstack"]));
              std::string msg = e.what() + CreationSuffix(probe);
              if (dynamic_cast<py::type_error*>(&e)) throw py::type_error(msg);
              if (dynamic_cast<py::value_error*>(&e)) throw py::value_error(msg);
              throw;
            }
            return AppendCheckedOp(&b, type, ToVarNameMap(ins), ToVarNameMap(outs), std::move(converted), index);
          },
          py::arg("type"), py::arg("inputs"), py::arg("outputs"), py::arg("attrs"), py::arg("index") = -1,
          py::return_value_policy::reference_internal,
          "validate against the registered op, fill attribute defaults, run compile-time shape inference")
      .def(
          "insert_desc",
          [](BlockDesc& b, size_t index, const OpDesc& src) {
            OpDesc* op = b.InsertOp(index);
            op->set_type(src.type());
            for (auto& kv : src.inputs()) op->SetInput(kv.first, kv.second);
            for (auto& kv : src.outputs()) op->SetOutput(kv.first, kv.second);
            for (auto& kv : src.attrs()) op->SetAttr(kv.first, kv.second);
            return op;
          },
          py::return_value_policy::reference_internal, "insert a copy of an unchecked OpDesc (backward)")
      .def("infer_shape", [](BlockDesc& b, OpDesc& op) { InferShapeAtCompileTime(&b, &op); });

  py::class_<ProgramDesc>(m, "ProgramDesc")
      .def(py::init<>())
      .def(py::init<const ProgramDesc&>())
      .def("block", &ProgramDesc::Block, py::return_value_policy::reference_internal)
      .def("num_blocks", &ProgramDesc::Size)
      .def("append_block", &ProgramDesc::AppendBlock, py::return_value_policy::reference_internal)
      .def("version", &ProgramDesc::version)
      .def("uid", &ProgramDesc::uid)
      .def("serialize_to_string", [](const ProgramDesc& p) { return py::bytes(p.Serialize()); })
      .def_static("parse_from_string",
                  [](const py::bytes& b) {
                    auto p = ProgramDesc::Deserialize(std::string(b));
                    ValidateProgram(*p);  // what Python-built programs meet at append time, and the block structure
                    return p;
                  })
      .def("to_string", &ProgramDesc::ToString);

  // ---------------------------------------------------------------- registry
  m.def("op_types", []() { return OpRegistry::Instance().Types(); });
  m.def("has_op", [](const std::string& t) { return OpRegistry::Instance().Find(t) != nullptr; });
  m.def("op_proto", [](const std::string& t) { return ProtoDict(OpRegistry::Instance().Get(t)); });
  m.def(
      "make_grad_ops",
      [](const OpDesc& fwd, const std::set<std::string>& no_grad, const std::vector<int>& grad_blocks,
         const std::map<std::string, std::string>& renames, const std::string& temp_prefix) {
        const OpInfo& info = OpRegistry::Instance().Get(fwd.type());
        FL_ENFORCE(info.differentiable(), "op ", fwd.type(), " has no gradient", CreationSuffix(fwd));
        GradOpMaker maker(fwd, no_grad, grad_blocks, &renames, temp_prefix);
        if (info.grad_maker) info.grad_maker(maker);
        return maker.TakeOps();
      },
      py::arg("fwd"), py::arg("no_grad_set"), py::arg("grad_blocks") = std::vector<int>{},
      py::arg("renames") = std::map<std::string, std::string>{}, py::arg("temp_prefix") = std::string(),
      "the grad op descs for a forward op (Fluid's get_grad_op_desc); grad_blocks: the grad blocks of its "
      "sub-blocks; renames: gradient names already taken in the block -> fresh names; temp_prefix: makes the "
      "names of intermediate variables unique");
  m.def(
      "dtypes",
      []() {
        py::list l;
#define FL_DTYPE_ENTRY(n, v, type, fluid_name, cpp_name, format)                              \
  l.append(py::dict(py::arg("name") = fluid_name, py::arg("value") = v, py::arg("enum") = #n, \
                    py::arg("itemsize") = sizeof(type), py::arg("cpp_name") = cpp_name));
        FL_FOR_EACH_DTYPE(FL_DTYPE_ENTRY)
#undef FL_DTYPE_ENTRY
        return l;
      },
      "the element types: Fluid's name (= numpy's), VarType value, enum name, item size, C++ name");
  m.def(
      "var_kinds",
      []() {
        py::dict d;
#define FL_VAR_KIND_ENTRY(n, value) d[#n] = value;
        FL_FOR_EACH_VAR_KIND(FL_VAR_KIND_ENTRY)
#undef FL_VAR_KIND_ENTRY
        return d;
      },
      "the variable kinds (LOD_TENSOR, ...) and their VarType values");
  m.def(
      "names",
      []() {
        py::dict d;
        d["grad_suffix"] = kGradSuffix;
        d["empty"] = kEmptyVarName;
        d["rename"] = kRenameMarker;
        d["temp"] = kTempVarName;
        return d;
      },
      "reserved variable names: the gradient suffix, @EMPTY@, @RENAME@, @TEMP@");
  m.def(
      "op_roles",
      []() {
        py::dict d;
#define FL_OP_ROLE_ENTRY(name, value) d[#name] = static_cast<int>(OpRole::value);
        FL_FOR_EACH_OP_ROLE(FL_OP_ROLE_ENTRY)
#undef FL_OP_ROLE_ENTRY
        return d;
      },
      "op_role attribute values: Forward, Backward, Optimize, RPC, Dist, LRSched, Loss");

  // ---------------------------------------------------------------- IR passes
  m.def(
      "passes",
      []() {
        py::list l;
        for (const PassInfo* p : PassRegistry::Instance().All())
          l.append(py::dict(py::arg("name") = p->name, py::arg("order") = p->order, py::arg("doc") = p->doc));
        return l;
      },
      "the registered IR passes in the order they run: [{'name', 'order', 'doc'}]");
  m.def(
      "apply_passes",
      [](const ProgramDesc& desc, const std::vector<std::string>& names, const std::vector<std::string>& keep) {
        auto copy = std::make_unique<ProgramDesc>(desc);
        PassContext ctx;
        ctx.protected_vars.insert(keep.begin(), keep.end());
        auto results = ApplyPasses(*copy, names, ctx);
        return py::make_tuple(std::move(copy), PassResultsToPython(results));
      },
      py::arg("desc"), py::arg("passes"), py::arg("protected") = std::vector<std::string>{},
      "runs the named passes over a copy of `desc` (the `protected` names keep their values): (copy, results)");

  // ---------------------------------------------------------------- executor
  py::class_<PreparedProgram>(m, "PreparedProgram")
      .def(py::init([](const ProgramDesc& desc, int block, Scope* scope, const Place& place,
                       const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
                       const std::vector<std::string>& passes, bool fetch_on_device) {
             FL_ENFORCE(scope == nullptr || Scope::IsAlive(scope),
                        "Executor: the scope was deleted (its parent called drop_kids())");
             return std::make_unique<PreparedProgram>(desc, block, scope, place, feeds, fetches, passes,
                                                      fetch_on_device);
           }),
           py::arg("desc"), py::arg("block"), py::arg("scope"), py::arg("place"), py::arg("feeds"), py::arg("fetches"),
           py::arg("passes") = std::vector<std::string>{},
           py::arg("fetch_on_device") = false)  // no keep_alive on the scope: the executor's cache holds it
                                                // weakly, Run checks it is alive
      .def(
          "run",
          [](PreparedProgram& p, const py::list& feeds, bool return_numpy) {
            std::vector<Tensor> in;
            in.reserve(feeds.size());
            py::list keep;  // the (possibly converted) arrays the borrowed tensors point into
            const auto& targets = p.feed_targets();
            for (size_t i = 0; i < feeds.size(); ++i)
              in.push_back(FeedTensor(feeds[i], keep,
                                      "feed '" + (i < targets.size() ? targets[i].name : std::to_string(i)) + "'"));
            FetchList out;
            try {
              // Only Python's main thread sees KeyboardInterrupt: only its runs stop on Ctrl-C.
              std::optional<InterruptibleRun> interruptible;
              if (PyThread_get_thread_ident() == MainThreadIdent()) {
                interruptible.emplace();
                // A Ctrl-C that came before the run (while preparing it) raises now; one that comes after
                // this point sets the flag the run checks.
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
              }
              py::gil_scoped_release release;
              out = p.Run(std::move(in));
            } catch (const Interrupted&) {
              // Python's handler (chained behind ours) has run: raise what it raises, KeyboardInterrupt
              // by default; a handler that returns still ends the run with KeyboardInterrupt.
              if (PyErr_CheckSignals() == 0) PyErr_SetNone(PyExc_KeyboardInterrupt);
              throw py::error_already_set();
            }
            py::list r;
            for (auto& v : out) r.append(FetchedValue(v, return_numpy));
            return r;
          },
          py::arg("feeds"), py::arg("return_numpy") = true)
      .def("program", &PreparedProgram::program, py::return_value_policy::reference_internal)
      .def("num_runs", &PreparedProgram::num_runs)
      .def("pass_results", [](const PreparedProgram& p) { return PassResultsToPython(p.pass_results()); })
      .def(
          "local_scope",
          [](const PreparedProgram& p) { return Scope::IsAlive(p.local_scope()) ? p.local_scope() : nullptr; },
          py::return_value_policy::reference_internal);
  m.def(
      "_set_fetch_scalar_type",
      [](py::object type) {
        py::object ndarray = py::module_::import("numpy").attr("ndarray");
        FL_ENFORCE(PyType_Check(type.ptr()) && PyObject_IsSubclass(type.ptr(), ndarray.ptr()) == 1,
                   "_set_fetch_scalar_type: expects a numpy.ndarray subclass");
        PyObject* old = ScalarArrayType();
        ScalarArrayType() = type.release().ptr();
        Py_XDECREF(old);
      },
      "the ndarray subclass that PreparedProgram.run returns fetched 1-element arrays of rank >= 1 as");
  m.def("set_check_nan_inf", &SetCheckNanInf, py::arg("on"), "FLAGS_check_nan_inf (fluid.set_flags)");
  m.def("get_check_nan_inf", &CheckNanInf);
  m.def("num_prepared", &PreparedProgram::NumPrepared, "how many times any block was prepared (cache misses)");

  // ---------------------------------------------------------------- memory, threads, logging, profiler
  m.def(
      "memory_stats", [](const Place& p) { return StatsDict(GetAllocator(p).Stats()); },
      py::arg("place") = Place::CPU());
  m.def("reset_peak_memory", [](const Place& p) { GetAllocator(p).ResetPeak(); }, py::arg("place") = Place::CPU());
  m.def(
      "release_cached_memory", [](const Place& p) { GetAllocator(p).ReleaseCached(); }, py::arg("place") = Place::CPU(),
      "give the allocator's cached free blocks back to the system");
  m.def(
      "set_num_threads",
      [](int n) {
        FL_ENFORCE(n >= 1 && n <= ThreadPool::kMaxThreads, "set_num_threads: n = ", n, " must be in [1, ",
                   ThreadPool::kMaxThreads, "]");
        ThreadPool::Instance().SetSize(n);
      },
      py::arg("n"), "threads fluidlite's kernels and GEMMs run on (OpenBLAS itself stays single-threaded)");
  m.def("get_num_threads", []() { return ThreadPool::Instance().Size(); });
  auto pool_stats = []() {
    const ThreadPool::Stats s = ThreadPool::Instance().GetStats();
    py::dict d;
    d["jobs"] = s.jobs;
    d["chunks"] = s.chunks;
    d["worker_chunks"] = s.worker_chunks;
    d["serial_jobs"] = s.serial_jobs;
    d["caller_sleeps"] = s.caller_sleeps;
    d["wait_ns"] = s.wait_ns;
    d["backoffs"] = s.backoffs;
    d["probes"] = s.probes;
    d["resumes"] = s.resumes;
    d["backed_off"] = s.backed_off;
    d["gain"] = s.gain;
    d["chunks_per_thread"] = s.chunks_per_thread;
    d["backoff"] = s.backoff;
    d["spin_us"] = s.spin_us;
    return d;
  };
  m.def("thread_pool_stats", pool_stats,
        "the pool since reset_thread_pool_stats: jobs, chunks, worker_chunks (parallel jobs), serial_jobs (chunks "
        "all on the caller: backed off, busy or nested), caller_sleeps, wait_ns; backoffs, probes, resumes, backed_off "
        "and the last window's gain; the "
        "options");
  m.def("reset_thread_pool_stats", []() { ThreadPool::Instance().ResetStats(); });
  m.def(
      "thread_pool_options",
      [pool_stats](int chunks_per_thread, int backoff, int64_t spin_us) {
        FL_ENFORCE(chunks_per_thread == -1 || (chunks_per_thread >= 1 && chunks_per_thread <= 64),
                   "thread_pool_options: chunks_per_thread = ", chunks_per_thread, " must be in [1, 64]");
        FL_ENFORCE(backoff >= -1 && backoff <= 2, "thread_pool_options: backoff = ", backoff,
                   " must be 0 (never), 1 (when parallel jobs stop paying) or 2 (always: the caller alone)");
        FL_ENFORCE(spin_us >= -1 && spin_us <= 1000000, "thread_pool_options: spin_us = ", spin_us,
                   " must be in [0, 1000000]");
        ThreadPool::Instance().SetOptions(chunks_per_thread, backoff, spin_us);
        return pool_stats();
      },
      py::arg("chunks_per_thread") = -1, py::arg("backoff") = -1, py::arg("spin_us") = -1,
      "set the pool's chunks per thread, back-off (0 never, 1 when parallel jobs stop paying, 2 always: chunks on "
      "the caller alone; changing it starts the policy afresh) and worker spin time "
      "(-1: leave as is); returns thread_pool_stats()");
  m.def(
      "_pool_policy_simulate",
      [](const std::vector<std::tuple<int64_t, double, double>>& jobs) {
        // Each (start_ns, serial_ns, wall_ns): a job the caller starts; if the policy lets it run in parallel it is
        // measured as given. Per job: (ran in parallel, backed off after it, probe interval ns, last gain).
        PoolPolicy policy;
        py::list out;
        for (const auto& [start, serial, wall] : jobs) {
          const bool parallel = policy.BeginJob(start);
          if (parallel) policy.EndJob(start + static_cast<int64_t>(wall), serial, wall);
          out.append(py::make_tuple(parallel, policy.backed_off(), policy.interval_ns(), policy.gain()));
        }
        return out;
      },
      py::arg("jobs"), "test hook: the thread pool's back-off policy (csrc/pool_policy.h) over made-up jobs");
  m.def(
      "_parallel_for_check",
      [](int64_t n, int64_t grain, int repeats) {
        // ParallelFor(n, grain) `repeats` times with the GIL released: per index, how often it ran; the slices
        // run, and how many of them ran off the calling thread.
        FL_ENFORCE(n >= 0 && grain >= 1 && repeats >= 1, "_parallel_for_check: bad arguments");
        std::vector<std::atomic<int>> counts(static_cast<size_t>(n));
        std::atomic<int64_t> slices{0}, off_caller{0};
        {
          py::gil_scoped_release release;
          const auto caller = std::this_thread::get_id();
          for (int r = 0; r < repeats; ++r)
            ParallelFor(n, grain, [&](int64_t b, int64_t e) {
              for (int64_t i = b; i < e; ++i) counts[static_cast<size_t>(i)].fetch_add(1);
              slices.fetch_add(1);
              if (std::this_thread::get_id() != caller) off_caller.fetch_add(1);
            });
        }
        py::array_t<int64_t> out(n);
        for (int64_t i = 0; i < n; ++i) out.mutable_at(i) = counts[static_cast<size_t>(i)].load();
        return py::make_tuple(out, slices.load(), off_caller.load());
      },
      py::arg("n"), py::arg("grain"), py::arg("repeats") = 1,
      "test hook: ParallelFor's coverage (counts per index, slices, slices run off the caller)");
  m.def("blas_info", []() {
    py::dict d;
    d["library"] = "scipy-openblas32";
    d["config"] = std::string(scipy_openblas_get_config());
    d["corename"] = std::string(scipy_openblas_get_corename());
    return d;
  });

  m.def("set_recurrent_fluid_mode", &SetRecurrentFluidMode, py::arg("on"),
        "run StaticRNN the way Fluid 1.x did (new step scopes each run, copied memories, a sum per parameter "
        "per step) -- for before/after comparisons in the profiler");
  m.def("get_recurrent_fluid_mode", &RecurrentFluidMode, "whether set_recurrent_fluid_mode(True) is in effect");
  m.def("set_vlog_level", &SetVlogLevel);
  m.def("get_vlog_level", &GetVlogLevel);
  m.def("set_vmodule", &SetVmodule);
  m.def("get_vmodule", &GetVmodule);
  m.def("vlog_level_for", [](const std::string& file) { return ResolveVlogLevel(file.c_str()); });
  m.def("log_line", &WriteLogLine, py::arg("severity"), py::arg("file"), py::arg("line"), py::arg("message"));

  m.def("enable_profiler", &EnableProfiler);
  m.def("disable_profiler", &DisableProfiler);
  m.def("is_profiler_enabled", &ProfilerEnabled);
  m.def("reset_profiler", &ResetProfiler);
  m.def("set_profiler_event_cap", &SetProfilerEventCap);
  m.def("profiler_dropped_events", &ProfilerDroppedEvents);
  m.def("now_ns", &NowNs);
  m.def(
      "push_event",
      [](const std::string& name, const std::string& category) { return OpenEvent(Intern(name), Intern(category)); },
      py::arg("name"), py::arg("category") = "User",
      "open a range on this thread (a user range by default); returns a token for pop_event (-1 when off)");
  m.def(
      "push_run_event", []() { return OpenEvent("Executor.run", "Python"); },
      "open the Python-side Executor.run event of one exe.run call (push_event without interning its names)");
  m.def("pop_event", [](int64_t token) {
    if (token >= 0) CloseEvent(token);
  });
  m.def("profiler_event_cap", &ProfilerEventCap);
  m.def(
      "collect_events",
      []() {
        std::vector<ProfEvent> evs;
        {
          py::gil_scoped_release release;
          evs = CollectEvents();
        }
        py::list l(evs.size());
        for (size_t i = 0; i < evs.size(); ++i) {
          const ProfEvent& e = evs[i];
          l[i] =
              py::make_tuple(e.name, e.category, e.start_ns, e.end_ns, e.thread, e.os_tid, e.depth, e.parent, e.bytes,
                             e.args ? py::str(e.args) : py::str(""), e.cpu_ns, e.mem_in_use, e.mem_peak, e.value);
        }
        return l;
      },
      "(name, category, start_ns, end_ns, thread, os_tid, depth, parent, bytes, args, cpu_ns, mem_in_use, mem_peak, "
      "value) per closed event, grouped by thread in record order; parent indexes this list");
  m.def("set_profiler_op_detail", &SetProfilerOpDetail,
        "Fluid's tracer_option OpDetail: op events get <type>/infer_shape and <type>/compute children");
  BindComm(m);
  BindDevice(m);  // CUDA places and memory, device events, DLPack (device_bindings.cc)
}
