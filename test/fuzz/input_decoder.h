// A tiny decoder of fuzzer input: bytes in, small choices out. libFuzzer's
// FuzzedDataProvider would do, but it ships with clang only and the replay executables are
// built by gcc too; one decoder keeps the same bytes meaning the same program in both.
//
// Choices are read from the front. An exhausted input reads as zeros, so every byte string
// (the empty one included) decodes to some program and a short input to a short one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace magpie::fuzz {

class input_decoder {
 public:
  input_decoder(const std::uint8_t* data, std::size_t size) noexcept : data_(data), size_(size) {}

  // empty says whether every byte was read.
  bool empty() const noexcept { return at_ >= size_; }

  // byte is the next byte, or 0 once the input is exhausted.
  std::uint8_t byte() noexcept { return at_ < size_ ? data_[at_++] : std::uint8_t{0}; }

  // below is a choice in [0, bound), bound in [1, 256].
  unsigned below(unsigned bound) noexcept { return bound <= 1 ? 0u : byte() % bound; }

  // flag is a yes/no choice.
  bool flag() noexcept { return (byte() & 1u) != 0; }

  // chance is true for `in_256` of the 256 byte values (0: never, 256: always).
  bool chance(unsigned in_256) noexcept { return byte() < in_256; }

  // pick is one of `choices` (a braced list of a few values).
  template <class T>
  T pick(std::initializer_list<T> choices) noexcept {
    return choices.begin()[below(static_cast<unsigned>(choices.size()))];
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

}  // namespace magpie::fuzz
