#include "sparse_rows.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace fl {

namespace {

template <typename T>
void MergeTyped(const SelectedRows& in, int64_t width, SelectedRows* out) {
  const int64_t n = static_cast<int64_t>(in.rows.size());
  // (row, position) pairs sorted: rows ascending, repeats in their original order (a deterministic sum).
  std::vector<std::pair<int64_t, int64_t>> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = {in.rows[i], i};
  std::sort(order.begin(), order.end());
  int64_t distinct = 0;
  for (int64_t k = 0; k < n; ++k) distinct += k == 0 || order[k].first != order[k - 1].first;
  DDim vd = in.value.dims();
  vd[0] = distinct;
  T* dst = out->value.mutable_data<T>(vd, in.value.place());
  const T* src = n ? in.value.data<T>() : nullptr;
  out->rows.clear();
  out->rows.reserve(distinct);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = order[k].second;
    const T* s = src + i * width;
    if (out->rows.empty() || out->rows.back() != in.rows[i]) {
      out->rows.push_back(in.rows[i]);
      std::memcpy(dst + (out->rows.size() - 1) * width, s, width * sizeof(T));
    } else {
      T* d = dst + (out->rows.size() - 1) * width;
      for (int64_t j = 0; j < width; ++j) d[j] += s[j];
    }
  }
}

std::mutex& TableMutex() {
  static std::mutex mu;
  return mu;
}
std::unordered_map<std::string, bool>& Table() {
  static std::unordered_map<std::string, bool> t;
  return t;
}

}  // namespace

SelectedRows MergeAdd(const SelectedRows& in, const std::string& what) {
  SelectedRows out;
  out.height = in.height;
  const DDim& d = in.value.dims();
  FL_ENFORCE(d.size() >= 1 && d[0] == static_cast<int64_t>(in.rows.size()), what, ": SelectedRows has ", in.rows.size(),
             " rows but its value is ", d);
  int64_t width = 1;
  for (int i = 1; i < d.size(); ++i) width *= d[i];
  switch (in.value.dtype()) {
    case DType::FP32: MergeTyped<float>(in, width, &out); break;
    case DType::FP64: MergeTyped<double>(in, width, &out); break;
    default:
      FL_THROW(what, ": cannot merge SelectedRows rows of ", DTypeName(in.value.dtype()), " (float32/float64 only)");
  }
  return out;
}

void AddSelectedRowsTo(const SelectedRows& sr, Tensor* out, const std::string& what) {
  const DDim full = sr.CompleteDims();
  FL_ENFORCE(out->dims() == full && out->dtype() == sr.value.dtype(), what, ": SelectedRows (height ", sr.height,
             ", value ", sr.value.dims(), ", ", DTypeName(sr.value.dtype()), ") does not match the dense tensor ",
             out->dims(), " (", DTypeName(out->dtype()), ")");
  const int64_t n = static_cast<int64_t>(sr.rows.size());
  if (n == 0) return;
  const int64_t width = sr.value.numel() / n;
  for (int64_t i = 0; i < n; ++i)
    FL_ENFORCE(sr.rows[i] >= 0 && sr.rows[i] < sr.height, what, ": SelectedRows row ", sr.rows[i],
               " is out of range [0, ", sr.height, ")");
  auto add = [&](auto* dst, const auto* src) {
    for (int64_t i = 0; i < n; ++i) {
      auto* d = dst + sr.rows[i] * width;
      const auto* s = src + i * width;
      for (int64_t j = 0; j < width; ++j) d[j] += s[j];
    }
  };
  switch (sr.value.dtype()) {
    case DType::FP32: add(static_cast<float*>(out->raw_mutable()), sr.value.data<float>()); break;
    case DType::FP64: add(static_cast<double*>(out->raw_mutable()), sr.value.data<double>()); break;
    default: FL_THROW(what, ": cannot add SelectedRows of ", DTypeName(sr.value.dtype()), " (float32/float64 only)");
  }
}

void RegisterSelectedRowsValueOp(const std::string& type, bool merge_first) {
  std::lock_guard<std::mutex> lock(TableMutex());
  Table()[type] = merge_first;
}

const bool* FindSelectedRowsValueOp(const std::string& type) {
  std::lock_guard<std::mutex> lock(TableMutex());
  auto it = Table().find(type);
  return it == Table().end() ? nullptr : &it->second;
}

}  // namespace fl
