// Element types. Values follow Fluid's VarType so serialized programs and `dtype` attrs match Fluid.
// FL_FOR_EACH_DTYPE is the one list of them: every dtype switch in C++ and the dtype tables Python reads
// (core.dtypes()) are generated from it.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "enforce.h"

namespace fl {

// float16 tensors can be stored, fed and fetched; no kernel computes on them, so it has no C++ type here.
struct Float16 {
  uint16_t bits;
};

// name, VarType value, C++ type, Fluid's name, the C++ name Fluid's GLOG lines print, buffer-protocol format.
#define FL_FOR_EACH_DTYPE(_)                                         \
  _(BOOL, 0, bool, "bool", "bool", "?")                              \
  _(INT16, 1, int16_t, "int16", "int16_t", "h")                      \
  _(INT32, 2, int32_t, "int32", "int", "i")                          \
  _(INT64, 3, int64_t, "int64", "int64_t", "q")                      \
  _(FP16, 4, Float16, "float16", "::paddle::platform::float16", "e") \
  _(FP32, 5, float, "float32", "float", "f")                         \
  _(FP64, 6, double, "float64", "double", "d")                       \
  _(UINT8, 20, uint8_t, "uint8", "uint8_t", "B")                     \
  _(INT8, 21, int8_t, "int8", "int8_t", "b")

enum class DType : int {
#define FL_DTYPE_ENUM(name, v, type, fluid_name, cpp_name, format) name = v,
  FL_FOR_EACH_DTYPE(FL_DTYPE_ENUM)
#undef FL_DTYPE_ENUM
      UNDEFINED = 127,
};

constexpr int kNumDTypeSlots = 22;  // DType values index kernel tables; UNDEFINED never does.

inline bool IsKnownDType(DType t) {
  switch (t) {
#define FL_DTYPE_CASE(name, v, type, fluid_name, cpp_name, format) case DType::name:
    FL_FOR_EACH_DTYPE(FL_DTYPE_CASE)
#undef FL_DTYPE_CASE
    return true;
    default: return false;
  }
}

inline size_t SizeOf(DType t) {
  switch (t) {
#define FL_DTYPE_SIZE(name, v, type, fluid_name, cpp_name, format) \
  case DType::name: return sizeof(type);
    FL_FOR_EACH_DTYPE(FL_DTYPE_SIZE)
#undef FL_DTYPE_SIZE
    default: FL_THROW("unknown dtype ", static_cast<int>(t));
  }
}

// Fluid's user-facing names ("float32") ...
inline const char* DTypeName(DType t) {
  switch (t) {
#define FL_DTYPE_NAME(name, v, type, fluid_name, cpp_name, format) \
  case DType::name: return fluid_name;
    FL_FOR_EACH_DTYPE(FL_DTYPE_NAME)
#undef FL_DTYPE_NAME
    default: return "undefined";
  }
}

// ... the C++ type names Fluid's GLOG lines print ("float") ...
inline const char* DTypeCppName(DType t) {
  switch (t) {
#define FL_DTYPE_CPP_NAME(name, v, type, fluid_name, cpp_name, format) \
  case DType::name: return cpp_name;
    FL_FOR_EACH_DTYPE(FL_DTYPE_CPP_NAME)
#undef FL_DTYPE_CPP_NAME
    default: return "";
  }
}

// ... and the buffer-protocol (numpy) format character ("f").
inline const char* DTypeFormat(DType t) {
  switch (t) {
#define FL_DTYPE_FORMAT(name, v, type, fluid_name, cpp_name, format) \
  case DType::name: return format;
    FL_FOR_EACH_DTYPE(FL_DTYPE_FORMAT)
#undef FL_DTYPE_FORMAT
    default: FL_THROW("tensor has no dtype (it was never written)");
  }
}

template <typename T> struct DTypeOf;
#define FL_DTYPE_OF(name, v, type, fluid_name, cpp_name, format) \
  template <> struct DTypeOf<type> {                             \
    static constexpr DType value = DType::name;                  \
  };
FL_FOR_EACH_DTYPE(FL_DTYPE_OF)
#undef FL_DTYPE_OF

template <typename T> struct TypeTag {
  using type = T;
};

// The dtypes kernels compute on: every dtype but float16.
inline bool IsPlainDType(DType t) { return IsKnownDType(t) && t != DType::FP16; }

// Calls f(TypeTag<T>{}) for the C++ type of `t`. The one place that maps runtime dtypes to types.
template <typename F>
auto VisitDType(DType t, F&& f) {
  switch (t) {
#define FL_DTYPE_VISIT(name, v, type, fluid_name, cpp_name, format)          \
  case DType::name:                                                          \
    if constexpr (!std::is_same_v<type, Float16>) return f(TypeTag<type>{}); \
    break;
    FL_FOR_EACH_DTYPE(FL_DTYPE_VISIT)
#undef FL_DTYPE_VISIT
    default: break;
  }
  FL_THROW("dtype ", DTypeName(t), " is not supported here");
}

}  // namespace fl
