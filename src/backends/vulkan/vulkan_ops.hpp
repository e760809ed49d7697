// The first Vulkan ops, as plain functions on device buffers. Each records
// into a CommandBatch (the normal path: many ops, one submit); the overloads
// taking a VulkanDevice run one op in a batch of its own.
//
// Batch invariance: an output row is reduced in an order that depends only
// on its own sizes, never on how many rows or tokens run beside it, so token
// t gives the same bits whether n_tok is 1 or 37.
#pragma once

#include <cstdint>

namespace cortiq::vulkan {

class CommandBatch;
class VulkanBuffer;
class VulkanDevice;
class VulkanMatrix;

// y[t][r] = dot(W row r, x row t) for t < n_tok: x holds n_tok rows of
// n_cols floats, y n_tok rows of n_rows floats. Float32 accumulation.
// Throws cortiq::Error when the buffers are too small or too large for the
// device (one binding must span a whole buffer).
void matmul(CommandBatch& batch, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y);
void matmul(VulkanDevice& device, const VulkanMatrix& w, const VulkanBuffer& x, int64_t n_tok,
            VulkanBuffer& y);

// out = x / sqrt(mean(x^2) + eps) * weight for each of n_rows rows of
// `width` floats (kernels/cpu/norm.hpp's rms_norm_rows). weight is width
// floats, or null for none; out may be x.
void rms_norm_rows(CommandBatch& batch, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows);
void rms_norm_rows(VulkanDevice& device, const VulkanBuffer& x, const VulkanBuffer* weight,
                   float eps, VulkanBuffer& out, int64_t width, int64_t n_rows);

}  // namespace cortiq::vulkan
