// GGUF metadata values: the thirteen value types of the format, with arrays
// kept as typed vectors (a vocabulary holds 10^5 strings; one std::string
// each, not one variant each). Nested arrays are arrays of arrays.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cortiq::gguf {

enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

// "u32", "string", "array"... as the peer prints them; "?" when invalid.
const char* value_type_name(ValueType type);
bool is_valid_value_type(uint32_t id);

struct Array {
  ValueType element_type = ValueType::u8;
  std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
               std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
               std::vector<float>, std::vector<bool>, std::vector<std::string>, std::vector<Array>,
               std::vector<uint64_t>, std::vector<int64_t>, std::vector<double>>
      items;

  size_t size() const;
  // The typed vector, or nullptr when the element type differs.
  template <class T>
  const std::vector<T>* as() const {
    return std::get_if<std::vector<T>>(&items);
  }
  // An empty array of the given element type.
  static Array of(ValueType element_type);
};

class Value {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                               std::string, Array, uint64_t, int64_t, double>;

  Value() : storage_(uint8_t{0}) {}
  template <class T>
  requires std::is_constructible_v<Storage, T&&> Value(T&& v)
      : storage_(std::forward<T>(v)) {}  // NOLINT: implicit by design
  Value(const char* s) : storage_(std::string(s)) {}

  ValueType type() const { return static_cast<ValueType>(storage_.index()); }
  const Storage& storage() const { return storage_; }

  // Accessors that convert only where no information is lost: any integer
  // type that fits, f32 or f64 for as_double. nullopt otherwise.
  std::optional<uint64_t> as_uint() const;
  std::optional<int64_t> as_int() const;
  std::optional<double> as_double() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const { return std::get_if<std::string>(&storage_); }
  const Array* as_array() const { return std::get_if<Array>(&storage_); }

  // Short human form: numbers, quoted strings, arrays abridged to
  // `max_items` elements with the total count ("[1, 2, 3, ... (32000 items)]").
  std::string to_display_string(size_t max_items = 8) const;

 private:
  Storage storage_;
};

static_assert(std::variant_size_v<Value::Storage> == 13, "one alternative per GGUF value type");

}  // namespace cortiq::gguf
