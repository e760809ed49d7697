#include "convert/llama2c/llama2c_checkpoint.hpp"

#include <bit>
#include <cstring>
#include <limits>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq::llama2c {

static_assert(std::endian::native == std::endian::little,
              "the llama2.c reader copies little-endian floats as they are");

namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

struct HeaderField {
  const char* name;
  int64_t Config::*member;
};

constexpr HeaderField kHeaderFields[] = {
    {"dim", &Config::dim},
    {"hidden_dim", &Config::hidden_dim},
    {"n_layers", &Config::n_layers},
    {"n_heads", &Config::n_heads},
    {"n_kv_heads", &Config::n_kv_heads},
    {"vocab_size", &Config::vocab_size},
    {"seq_len", &Config::seq_len},
};

int32_t read_i32(std::span<const std::byte> bytes, uint64_t offset) {
  int32_t v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

// a * b, or nullopt when it does not fit 64 bits.
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::string dims_text(const ArrayInfo& a, int64_t n_layers) {
  std::string s;
  if (a.per_layer) s += strfmt("[%lld]", static_cast<long long>(n_layers));
  for (const int64_t d : a.dims) s += strfmt("[%lld]", static_cast<long long>(d));
  return s;
}

// The arrays in file order, offsets not yet assigned.
std::vector<ArrayInfo> array_layout(const Config& c, int version) {
  const int64_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), v = c.vocab_size;
  const auto item = [](Weight w, bool per_layer, std::vector<int64_t> dims) {
    ArrayInfo a{w, per_layer, std::move(dims)};
    return a;
  };
  const ArrayInfo token_embedding = item(Weight::token_embedding, false, {v, d});
  const ArrayInfo rms_att = item(Weight::rms_att, true, {d});
  const ArrayInfo rms_ffn = item(Weight::rms_ffn, true, {d});
  const ArrayInfo rms_final = item(Weight::rms_final, false, {d});
  const ArrayInfo attention[] = {
      item(Weight::wq, true, {d, d}),
      item(Weight::wk, true, {kv, d}),
      item(Weight::wv, true, {kv, d}),
      item(Weight::wo, true, {d, d}),
  };
  const ArrayInfo ffn[] = {
      item(Weight::w1, true, {h, d}),
      item(Weight::w2, true, {d, h}),
      item(Weight::w3, true, {h, d}),
  };
  std::vector<ArrayInfo> out;
  if (version == 0) {
    out.push_back(token_embedding);
    out.push_back(rms_att);
    out.insert(out.end(), std::begin(attention), std::end(attention));
    out.push_back(rms_ffn);
    out.insert(out.end(), std::begin(ffn), std::end(ffn));
    out.push_back(rms_final);
    out.push_back(item(Weight::freq_cis_real, false, {c.seq_len, c.head_size() / 2}));
    out.push_back(item(Weight::freq_cis_imag, false, {c.seq_len, c.head_size() / 2}));
  } else {
    out.push_back(rms_att);
    out.push_back(rms_ffn);
    out.push_back(rms_final);
    out.push_back(token_embedding);
    out.insert(out.end(), std::begin(attention), std::end(attention));
    out.insert(out.end(), std::begin(ffn), std::end(ffn));
  }
  if (!c.shared_classifier) out.push_back(item(Weight::wcls, false, {v, d}));
  return out;
}

}  // namespace

std::string_view weight_name(Weight weight) {
  switch (weight) {
    case Weight::token_embedding:
      return "token_embedding";
    case Weight::rms_att:
      return "rms_att";
    case Weight::wq:
      return "wq";
    case Weight::wk:
      return "wk";
    case Weight::wv:
      return "wv";
    case Weight::wo:
      return "wo";
    case Weight::rms_ffn:
      return "rms_ffn";
    case Weight::w1:
      return "w1";
    case Weight::w2:
      return "w2";
    case Weight::w3:
      return "w3";
    case Weight::rms_final:
      return "rms_final";
    case Weight::freq_cis_real:
      return "freq_cis_real";
    case Weight::freq_cis_imag:
      return "freq_cis_imag";
    case Weight::wcls:
      return "wcls";
  }
  return "?";
}

Checkpoint Checkpoint::open(const std::filesystem::path& path) {
  Checkpoint c;
  c.file_ = MappedFile::open(path);
  c.bytes_ = c.file_.bytes();
  c.name_ = path.string();
  c.validate();
  return c;
}

Checkpoint Checkpoint::parse(std::span<const std::byte> bytes, std::string name) {
  Checkpoint c;
  c.bytes_ = bytes;
  c.name_ = std::move(name);
  c.validate();
  return c;
}

void Checkpoint::validate() {
  const uint64_t size = bytes_.size();
  const auto fail = [&](std::string_view field, uint64_t offset, const std::string& problem) {
    throw FormatError(name_, field, offset, problem);
  };

  // Which layout: a legacy file starts with dim, which is never "ak42".
  uint64_t fields_at = 0;
  uint64_t data_at = kLegacyHeaderBytes;
  if (size >= 4 && static_cast<uint32_t>(read_i32(bytes_, 0)) == kMagic) {
    if (size < kVersionedHeaderBytes) {
      fail("header", 0,
           strfmt("the file is %llu bytes, shorter than the %llu-byte header of a versioned "
                  "llama2.c checkpoint",
                  static_cast<unsigned long long>(size),
                  static_cast<unsigned long long>(kVersionedHeaderBytes)));
    }
    version_ = read_i32(bytes_, 4);
    if (version_ != 1) {
      fail("version", 4,
           version_ == 2
               ? std::string("version 2 (int8 Q8_0 groups) is not supported; export the model "
                             "with llama2.c's export.py --version 1 (float32) or --version 0")
               : strfmt("unknown llama2.c checkpoint version %d (known: 1)", version_));
    }
    fields_at = 8;
    data_at = kVersionedHeaderBytes;
  } else if (size < kLegacyHeaderBytes) {
    fail("header", 0,
         strfmt("the file is %llu bytes, shorter than the %llu-byte llama2.c header",
                static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(kLegacyHeaderBytes)));
  }

  for (size_t i = 0; i < std::size(kHeaderFields); ++i) {
    const uint64_t at = fields_at + 4 * i;
    const int32_t raw = read_i32(bytes_, at);
    const HeaderField& f = kHeaderFields[i];
    int64_t value = raw;
    if (version_ == 0 && &f == &kHeaderFields[5]) {  // vocab_size: the sign is a flag
      config_.shared_classifier = raw > 0;
      value = raw == std::numeric_limits<int32_t>::min() ? 0 : (raw < 0 ? -value : value);
    }
    if (value <= 0) {
      fail(f.name, at,
           strfmt("%d: must be positive (is this a llama2.c checkpoint?)", static_cast<int>(raw)));
    }
    config_.*f.member = value;
  }
  if (version_ == 1) {
    const auto flag = static_cast<uint8_t>(bytes_[36]);
    if (flag > 1) fail("shared_classifier", 36, strfmt("%u: must be 0 or 1", flag));
    config_.shared_classifier = flag == 1;
  }

  const Config& c = config_;
  const uint64_t heads_at = fields_at + 12;
  if (c.dim % c.n_heads != 0) {
    fail("n_heads", heads_at,
         strfmt("dim %lld is not a multiple of n_heads %lld", static_cast<long long>(c.dim),
                static_cast<long long>(c.n_heads)));
  }
  if (c.head_size() % 2 != 0) {
    fail("n_heads", heads_at,
         strfmt("head size dim / n_heads = %lld is odd (RoPE rotates pairs)",
                static_cast<long long>(c.head_size())));
  }
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0) {
    fail("n_kv_heads", heads_at + 4,
         strfmt("%lld KV heads do not divide %lld query heads",
                static_cast<long long>(c.n_kv_heads), static_cast<long long>(c.n_heads)));
  }

  arrays_ = array_layout(c, version_);
  uint64_t at = data_at;
  for (ArrayInfo& a : arrays_) {
    const std::string field = std::string(weight_name(a.weight)) + " " + dims_text(a, c.n_layers);
    std::optional<uint64_t> floats = 1;
    for (const int64_t d : a.dims) floats = floats ? checked_mul(*floats, d) : std::nullopt;
    const std::optional<uint64_t> item_bytes = floats ? checked_mul(*floats, 4) : std::nullopt;
    const std::optional<uint64_t> bytes =
        item_bytes && a.per_layer ? checked_mul(*item_bytes, c.n_layers) : item_bytes;
    if (!bytes || *bytes > kMaxU64 - at) fail(field, at, "its size overflows 64 bits");
    if (at + *bytes > size) {
      fail(field, at,
           strfmt("needs %llu bytes, but the file ends %llu bytes later (truncated, or a header "
                  "that does not belong to these weights)",
                  static_cast<unsigned long long>(*bytes),
                  static_cast<unsigned long long>(size - at)));
    }
    a.offset = at;
    a.item_floats = *floats;
    at += *bytes;
  }
  if (at != size) {
    const uint64_t extra = size - at;
    std::string problem =
        strfmt("%llu bytes follow the last array", static_cast<unsigned long long>(extra));
    if (c.shared_classifier && extra == static_cast<uint64_t>(c.vocab_size * c.dim * 4)) {
      problem += version_ == 0 ? ": exactly a [vocab][dim] classifier, but vocab_size is positive "
                                 "(a separate classifier needs a negative vocab_size)"
                               : ": exactly a [vocab][dim] classifier, but shared_classifier is 1";
    }
    fail("end of file", at, problem);
  }
}

const ArrayInfo* Checkpoint::find(Weight weight) const {
  for (const ArrayInfo& a : arrays_) {
    if (a.weight == weight) return &a;
  }
  return nullptr;
}

std::span<const std::byte> Checkpoint::item_bytes(Weight weight, int64_t layer) const {
  const ArrayInfo* a = find(weight);
  if (a == nullptr) {
    throw Error(name_ + ": the checkpoint has no " + std::string(weight_name(weight)) + " array");
  }
  const int64_t n_items = a->per_layer ? config_.n_layers : 1;
  if (layer < 0 || layer >= n_items) {
    throw Error(strfmt("%s: %s has no layer %lld", name_.c_str(),
                       std::string(weight_name(weight)).c_str(), static_cast<long long>(layer)));
  }
  return bytes_.subspan(a->offset + static_cast<uint64_t>(layer) * a->item_bytes(),
                        a->item_bytes());
}

std::vector<float> Checkpoint::item_floats(Weight weight, int64_t layer) const {
  const std::span<const std::byte> bytes = item_bytes(weight, layer);
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

TokenizerFile read_tokenizer(const std::filesystem::path& path, int64_t n_tokens) {
  const MappedFile file = MappedFile::open(path);
  return parse_tokenizer(file.bytes(), n_tokens, path.string());
}

TokenizerFile parse_tokenizer(std::span<const std::byte> bytes, int64_t n_tokens,
                              std::string_view name) {
  if (n_tokens <= 0) throw Error(std::string(name) + ": the model has no vocabulary size");
  uint64_t at = 0;
  const auto need = [&](uint64_t n, const std::string& field) {
    if (n > bytes.size() - at) {
      throw FormatError(name, field, at,
                        strfmt("needs %llu bytes, but the file ends %llu bytes later (truncated, "
                               "or the tokenizer of a model with fewer than %lld tokens)",
                               static_cast<unsigned long long>(n),
                               static_cast<unsigned long long>(bytes.size() - at),
                               static_cast<long long>(n_tokens)));
    }
  };
  TokenizerFile t;
  need(4, "max_token_length");
  const int32_t max_length = read_i32(bytes, 0);
  if (max_length < 0) {
    throw FormatError(name, "max_token_length", 0, strfmt("%d: must not be negative", max_length));
  }
  t.max_token_length = static_cast<uint32_t>(max_length);
  at = 4;
  // A token takes 8 bytes at least: no reservation beyond what the file can hold.
  const uint64_t fits = (bytes.size() - at) / 8;
  t.pieces.reserve(static_cast<size_t>(std::min<uint64_t>(fits, n_tokens)));
  t.scores.reserve(t.pieces.capacity());
  for (int64_t i = 0; i < n_tokens; ++i) {
    const std::string field = strfmt("token %lld", static_cast<long long>(i));
    need(8, field + " score and length");
    float score;
    std::memcpy(&score, bytes.data() + at, 4);
    const int32_t length = read_i32(bytes, at + 4);
    if (length < 0) {
      throw FormatError(name, field + " length", at + 4,
                        strfmt("%d: must not be negative", static_cast<int>(length)));
    }
    at += 8;
    need(static_cast<uint64_t>(length), field + " bytes");
    t.pieces.emplace_back(reinterpret_cast<const char*>(bytes.data() + at),
                          static_cast<size_t>(length));
    t.scores.push_back(score);
    at += static_cast<uint64_t>(length);
  }
  if (at != bytes.size()) {
    throw FormatError(
        name, "end of file", at,
        strfmt("%llu bytes follow token %lld: the tokenizer has more tokens than "
               "the model's vocab_size %lld",
               static_cast<unsigned long long>(bytes.size() - at),
               static_cast<long long>(n_tokens - 1), static_cast<long long>(n_tokens)));
  }
  return t;
}

}  // namespace cortiq::llama2c
