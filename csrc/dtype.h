// Element types. Values follow Fluid's VarType so serialized programs and `dtype` attrs match Fluid.
#pragma once
#include <cstdint>
#include <string>

#include "enforce.h"

namespace fl {

enum class DType : int {
  BOOL = 0,
  INT16 = 1,
  INT32 = 2,
  INT64 = 3,
  FP16 = 4,
  FP32 = 5,
  FP64 = 6,
  UINT8 = 20,
  INT8 = 21,
  UNDEFINED = 127,
};

constexpr int kNumDTypeSlots = 22;  // DType values index kernel tables; UNDEFINED never does.

inline size_t SizeOf(DType t) {
  switch (t) {
    case DType::BOOL: case DType::UINT8: case DType::INT8: return 1;
    case DType::INT16: case DType::FP16: return 2;
    case DType::INT32: case DType::FP32: return 4;
    case DType::INT64: case DType::FP64: return 8;
    default: FL_THROW("unknown dtype ", static_cast<int>(t));
  }
}

// Fluid's user-facing names ("float32") ...
inline const char* DTypeName(DType t) {
  switch (t) {
    case DType::BOOL: return "bool";
    case DType::INT16: return "int16";
    case DType::INT32: return "int32";
    case DType::INT64: return "int64";
    case DType::FP16: return "float16";
    case DType::FP32: return "float32";
    case DType::FP64: return "float64";
    case DType::UINT8: return "uint8";
    case DType::INT8: return "int8";
    default: return "undefined";
  }
}

// ... and the C++ type names Fluid's GLOG lines print ("float").
inline const char* DTypeCppName(DType t) {
  switch (t) {
    case DType::BOOL: return "bool";
    case DType::INT16: return "int16_t";
    case DType::INT32: return "int";
    case DType::INT64: return "int64_t";
    case DType::FP16: return "::paddle::platform::float16";
    case DType::FP32: return "float";
    case DType::FP64: return "double";
    case DType::UINT8: return "uint8_t";
    case DType::INT8: return "int8_t";
    default: return "";
  }
}

DType DTypeFromName(const std::string& name);  // "float32" / "fp32" / "float" ... ; throws on unknown

template <typename T> struct DTypeOf;
template <> struct DTypeOf<bool> { static constexpr DType value = DType::BOOL; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::INT16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::INT32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::INT64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::FP32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::FP64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::UINT8; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::INT8; };

template <typename T> struct TypeTag { using type = T; };

// Calls f(TypeTag<T>{}) for the C++ type of `t`. The one place that maps runtime dtypes to types.
template <typename F>
auto VisitDType(DType t, F&& f) {
  switch (t) {
    case DType::BOOL: return f(TypeTag<bool>{});
    case DType::INT16: return f(TypeTag<int16_t>{});
    case DType::INT32: return f(TypeTag<int32_t>{});
    case DType::INT64: return f(TypeTag<int64_t>{});
    case DType::FP32: return f(TypeTag<float>{});
    case DType::FP64: return f(TypeTag<double>{});
    case DType::UINT8: return f(TypeTag<uint8_t>{});
    case DType::INT8: return f(TypeTag<int8_t>{});
    default: FL_THROW("dtype ", DTypeName(t), " is not supported here");
  }
}

}  // namespace fl
