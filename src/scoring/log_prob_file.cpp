#include "scoring/log_prob_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq::scoring {

namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 4;

template <typename T>
void put(std::vector<std::byte>& out, T value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T get(const std::byte* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

void encode_log_probs(std::span<const float> logits, const kernels::LogSoftmax& row,
                      std::span<uint16_t> out) {
  const float max_logit = row.max;
  float min_logit = *std::min_element(logits.begin(), logits.end());
  min_logit = std::max(min_logit, max_logit - 16.0f);
  const auto log_sum_exp = static_cast<float>(row.log_sum_exp);
  const float min_log_prob = min_logit - max_logit - log_sum_exp;
  const float scale = (max_logit - min_logit) / 65535.0f;
  std::memcpy(out.data(), &scale, sizeof(float));
  std::memcpy(out.data() + 2, &min_log_prob, sizeof(float));
  uint16_t* codes = out.data() + 4;
  std::fill(codes, out.data() + out.size(), uint16_t{0});
  if (scale == 0.0f) return;
  const float inv_scale = 1.0f / scale;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > min_logit) {
      const long code = std::lrintf(inv_scale * (logits[i] - min_logit));
      codes[i] = static_cast<uint16_t>(std::clamp(code, 0L, 65535L));
    }
  }
}

LogProbWriter::LogProbWriter(const std::filesystem::path& path, const LogProbHeader& header,
                             std::span<const TokenId> tokens)
    : path_(path), header_(header), file_(std::fopen(path.c_str(), "wb")) {
  if (!file_) throw Error("cannot write " + path.string() + ": " + std::strerror(errno));
  if (static_cast<int64_t>(tokens.size()) < header.n_chunks * header.n_ctx) {
    throw Error("LogProbWriter: fewer tokens than the chunks hold");
  }
  std::vector<std::byte> head;
  for (const char c : kMagic) head.push_back(static_cast<std::byte>(c));
  put(head, static_cast<uint32_t>(header.n_ctx));
  put(head, static_cast<int32_t>(header.n_vocab));
  put(head, static_cast<int32_t>(header.n_chunks));
  const auto n_tokens = static_cast<size_t>(header.n_chunks * header.n_ctx);
  for (size_t i = 0; i < n_tokens; ++i) put(head, static_cast<int32_t>(tokens[i]));
  if (std::fwrite(head.data(), 1, head.size(), file_.get()) != head.size()) {
    throw Error("error writing " + path_.string());
  }
  row_.resize(header.row_values());
}

void LogProbWriter::write_chunk(std::span<const float> logits,
                                std::span<const kernels::LogSoftmax> rows) {
  const auto n_vocab = static_cast<size_t>(header_.n_vocab);
  for (size_t r = 0; r < rows.size(); ++r) {
    encode_log_probs(logits.subspan(r * n_vocab, n_vocab), rows[r], row_);
    if (std::fwrite(row_.data(), sizeof(uint16_t), row_.size(), file_.get()) != row_.size()) {
      throw Error("error writing " + path_.string());
    }
  }
}

void LogProbWriter::close() {
  if (file_ && std::fclose(file_.release()) != 0) throw Error("error writing " + path_.string());
}

LogProbReader::LogProbReader(const std::filesystem::path& path)
    : path_(path), file_(std::fopen(path.c_str(), "rb")) {
  const std::string name = path.string();
  if (!file_) throw Error("cannot open " + name + ": " + std::strerror(errno));
  std::byte head[kHeaderBytes];
  if (std::fread(head, 1, kHeaderBytes, file_.get()) != kHeaderBytes ||
      std::memcmp(head, kMagic, sizeof(kMagic)) != 0) {
    throw Error(name + " is not a log-probability file (no \"_logits_\" header)");
  }
  header_.n_ctx = get<uint32_t>(head + 8);
  header_.n_vocab = get<int32_t>(head + 12);
  header_.n_chunks = get<int32_t>(head + 16);
  if (header_.n_ctx < 4 || header_.n_vocab < 1 || header_.n_chunks < 1 ||
      header_.n_ctx > (int64_t{1} << 24) || header_.n_chunks > (int64_t{1} << 24)) {
    throw Error(strfmt("%s: implausible header (n_ctx %lld, n_vocab %lld, chunks %lld)",
                       name.c_str(), (long long)header_.n_ctx, (long long)header_.n_vocab,
                       (long long)header_.n_chunks));
  }
  const auto n_tokens = static_cast<uintmax_t>(header_.n_chunks * header_.n_ctx);
  const uintmax_t expected = kHeaderBytes + 4 * n_tokens +
                             static_cast<uintmax_t>(header_.n_chunks * header_.rows_per_chunk()) *
                                 header_.row_values() * sizeof(uint16_t);
  std::error_code error;
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size != expected) {
    throw Error(
        strfmt("%s: %ju bytes, but its header (n_ctx %lld, n_vocab %lld, %lld chunks) "
               "needs %ju: truncated or not a log-probability file",
               name.c_str(), error ? uintmax_t{0} : size, (long long)header_.n_ctx,
               (long long)header_.n_vocab, (long long)header_.n_chunks, expected));
  }
  std::vector<int32_t> ids(n_tokens);
  if (std::fread(ids.data(), sizeof(int32_t), ids.size(), file_.get()) != ids.size()) {
    throw Error("error reading " + name);
  }
  tokens_.assign(ids.begin(), ids.end());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i] < 0 || tokens_[i] >= header_.n_vocab) {
      throw Error(strfmt("%s: token %zu is id %d, outside its vocabulary of %lld", name.c_str(), i,
                         tokens_[i], (long long)header_.n_vocab));
    }
  }
  chunk_.resize(static_cast<size_t>(header_.rows_per_chunk()) * header_.row_values());
}

std::vector<LogProbRow> LogProbReader::read_chunk() {
  if (chunks_read_ >= header_.n_chunks) throw Error(path_.string() + ": no more chunks");
  if (std::fread(chunk_.data(), sizeof(uint16_t), chunk_.size(), file_.get()) != chunk_.size()) {
    throw Error("error reading " + path_.string());
  }
  ++chunks_read_;
  std::vector<LogProbRow> rows(static_cast<size_t>(header_.rows_per_chunk()));
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint16_t* at = chunk_.data() + r * header_.row_values();
    std::memcpy(&rows[r].scale, at, sizeof(float));
    std::memcpy(&rows[r].min_log_prob, at + 2, sizeof(float));
    rows[r].codes = {at + 4, static_cast<size_t>(header_.n_vocab)};
  }
  return rows;
}

}  // namespace cortiq::scoring
