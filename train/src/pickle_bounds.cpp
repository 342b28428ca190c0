#include "pcdino/train/pickle_bounds.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pcdino/core/error.hpp"

namespace pcdino::train {
namespace {

// How an opcode's argument is laid out after it (pickletools' ArgumentDescriptor: a fixed size, a line
// up to "\n", or a length of 1, 4 or 8 little-endian bytes then that many bytes).
enum class Arg : std::uint8_t {
  kNone,
  kFixed1,
  kFixed2,
  kFixed4,
  kFixed8,
  kLength1,
  kLength4,        // unsigned: BINUNICODE, BINBYTES
  kSignedLength4,  // signed, negative refused: BINSTRING, LONG4
  kLength8,
  kLine,
  kTwoLines,  // GLOBAL and INST: module "\n" name "\n"
  kMemo4,     // LONG_BINPUT: a 4-byte memo index
};

// What an opcode does to the unpickler's stack (pickletools' stack_before -> stack_after): it takes `pops`
// values (kToMark: every value above the topmost MARK, and the MARK), which must lie above that MARK as
// CPython's unpickler requires, then pushes `pushes`; a rule may ask more of what it takes.
constexpr std::int8_t kToMark = -1;
enum StackRule : std::uint8_t {
  kPlain = 0,
  kPairs = 1,  // an even count above the MARK: DICT, SETITEMS (keys and values)
  kOnto = 2,   // onto a value below the MARK: the list, dict or set APPENDS, SETITEMS, ADDITEMS fill
  kSome = 4,   // at least one value above the MARK: OBJ's class
  kMarks = 8,  // pushes a MARK
};

struct Opcode {
  unsigned char code;
  const char* name;
  Arg arg;
  std::int8_t pops, pushes;
  std::uint8_t rule;
};

// Every opcode of pickle protocols 0-5: CPython 3.11, Lib/pickletools.py, the `opcodes` list (name, code,
// arg, stack_before, stack_after). torch.save writes protocol 2; LibTorch's unpickler reads a subset and
// refuses the rest itself, but does not check its stack: a SETITEM on too short a stack or a DICT of an odd
// count reads past the stack's end (a damaged checkpoint crashed it so).
constexpr Opcode kOpcodes[] = {
    {'I', "INT", Arg::kLine, 0, 1, kPlain},
    {'J', "BININT", Arg::kFixed4, 0, 1, kPlain},
    {'K', "BININT1", Arg::kFixed1, 0, 1, kPlain},
    {'M', "BININT2", Arg::kFixed2, 0, 1, kPlain},
    {'L', "LONG", Arg::kLine, 0, 1, kPlain},
    {0x8a, "LONG1", Arg::kLength1, 0, 1, kPlain},
    {0x8b, "LONG4", Arg::kSignedLength4, 0, 1, kPlain},
    {'S', "STRING", Arg::kLine, 0, 1, kPlain},
    {'T', "BINSTRING", Arg::kSignedLength4, 0, 1, kPlain},
    {'U', "SHORT_BINSTRING", Arg::kLength1, 0, 1, kPlain},
    {'B', "BINBYTES", Arg::kLength4, 0, 1, kPlain},
    {'C', "SHORT_BINBYTES", Arg::kLength1, 0, 1, kPlain},
    {0x8e, "BINBYTES8", Arg::kLength8, 0, 1, kPlain},
    {0x96, "BYTEARRAY8", Arg::kLength8, 0, 1, kPlain},
    {0x97, "NEXT_BUFFER", Arg::kNone, 0, 1, kPlain},
    {0x98, "READONLY_BUFFER", Arg::kNone, 1, 1, kPlain},
    {'N', "NONE", Arg::kNone, 0, 1, kPlain},
    {0x88, "NEWTRUE", Arg::kNone, 0, 1, kPlain},
    {0x89, "NEWFALSE", Arg::kNone, 0, 1, kPlain},
    {'V', "UNICODE", Arg::kLine, 0, 1, kPlain},
    {0x8c, "SHORT_BINUNICODE", Arg::kLength1, 0, 1, kPlain},
    {'X', "BINUNICODE", Arg::kLength4, 0, 1, kPlain},
    {0x8d, "BINUNICODE8", Arg::kLength8, 0, 1, kPlain},
    {'F', "FLOAT", Arg::kLine, 0, 1, kPlain},
    {'G', "BINFLOAT", Arg::kFixed8, 0, 1, kPlain},
    {']', "EMPTY_LIST", Arg::kNone, 0, 1, kPlain},
    {'a', "APPEND", Arg::kNone, 2, 1, kPlain},
    {'e', "APPENDS", Arg::kNone, kToMark, 0, kOnto},
    {'l', "LIST", Arg::kNone, kToMark, 1, kPlain},
    {')', "EMPTY_TUPLE", Arg::kNone, 0, 1, kPlain},
    {'t', "TUPLE", Arg::kNone, kToMark, 1, kPlain},
    {0x85, "TUPLE1", Arg::kNone, 1, 1, kPlain},
    {0x86, "TUPLE2", Arg::kNone, 2, 1, kPlain},
    {0x87, "TUPLE3", Arg::kNone, 3, 1, kPlain},
    {'}', "EMPTY_DICT", Arg::kNone, 0, 1, kPlain},
    {'d', "DICT", Arg::kNone, kToMark, 1, kPairs},
    {'s', "SETITEM", Arg::kNone, 3, 1, kPlain},
    {'u', "SETITEMS", Arg::kNone, kToMark, 0, kPairs | kOnto},
    {0x8f, "EMPTY_SET", Arg::kNone, 0, 1, kPlain},
    {0x90, "ADDITEMS", Arg::kNone, kToMark, 0, kOnto},
    {0x91, "FROZENSET", Arg::kNone, kToMark, 1, kPlain},
    {'0', "POP", Arg::kNone, 1, 0, kPlain},
    {'2', "DUP", Arg::kNone, 1, 2, kPlain},
    {'(', "MARK", Arg::kNone, 0, 0, kMarks},
    {'1', "POP_MARK", Arg::kNone, kToMark, 0, kPlain},
    {'g', "GET", Arg::kLine, 0, 1, kPlain},
    {'h', "BINGET", Arg::kFixed1, 0, 1, kPlain},
    {'j', "LONG_BINGET", Arg::kFixed4, 0, 1, kPlain},
    {'p', "PUT", Arg::kLine, 1, 1, kPlain},
    {'q', "BINPUT", Arg::kFixed1, 1, 1, kPlain},
    {'r', "LONG_BINPUT", Arg::kMemo4, 1, 1, kPlain},
    {0x94, "MEMOIZE", Arg::kNone, 1, 1, kPlain},
    {0x82, "EXT1", Arg::kFixed1, 0, 1, kPlain},
    {0x83, "EXT2", Arg::kFixed2, 0, 1, kPlain},
    {0x84, "EXT4", Arg::kFixed4, 0, 1, kPlain},
    {'c', "GLOBAL", Arg::kTwoLines, 0, 1, kPlain},
    {0x93, "STACK_GLOBAL", Arg::kNone, 2, 1, kPlain},
    {'R', "REDUCE", Arg::kNone, 2, 1, kPlain},
    {'b', "BUILD", Arg::kNone, 2, 1, kPlain},
    {'i', "INST", Arg::kTwoLines, kToMark, 1, kPlain},
    {'o', "OBJ", Arg::kNone, kToMark, 1, kSome},
    {0x81, "NEWOBJ", Arg::kNone, 2, 1, kPlain},
    {0x92, "NEWOBJ_EX", Arg::kNone, 3, 1, kPlain},
    {0x80, "PROTO", Arg::kFixed1, 0, 0, kPlain},
    {'.', "STOP", Arg::kNone, 1, 0, kPlain},
    {0x95, "FRAME", Arg::kFixed8, 0, 0, kPlain},
    {'P', "PERSID", Arg::kLine, 0, 1, kPlain},
    {'Q', "BINPERSID", Arg::kNone, 1, 1, kPlain},
};

// kOpcodes by code: nullptr where no opcode has that byte.
constexpr std::array<const Opcode*, 256> by_code() {
  std::array<const Opcode*, 256> table{};
  for (const Opcode& op : kOpcodes) table[op.code] = &op;
  return table;
}
constexpr std::array<const Opcode*, 256> kByCode = by_code();

std::uint64_t little_endian(const char* p, std::size_t bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = bytes; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// What a stack or memo slot holds, as far as the checks need it.
enum class Value : std::uint8_t {
  kOther,
  kStorageType,   // GLOBAL torch.<Type>Storage: what LibTorch's unpickler turns into a dtype
  kPersistentId,  // a 5-tuple whose second value is a kStorageType: what BINPERSID reads
};

// Whether a GLOBAL's two lines, [begin, end), name torch.<Type>Storage.
bool storage_type(const char* begin, const char* end) {
  const std::string text(begin, end), module = "torch\n", suffix = "Storage\n";
  return text.size() > module.size() + suffix.size() && text.compare(0, module.size(), module) == 0 &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void check_pickle_bounds(const char* data, std::size_t size, const std::string& path,
                         const std::string& record) {
  std::size_t pos = 0;
  std::vector<Value> stack, memo;  // what the unpickler's stack and memo would hold, by kind
  std::vector<std::size_t> marks;  // the stack's size at each open MARK
  while (pos < size) {
    const unsigned char code = static_cast<unsigned char>(data[pos]);
    const Opcode* op = kByCode[code];
    const auto fail = [&](const std::string& what) {
      throw DataError(path + ": " + record + ", byte " + std::to_string(pos) + ": " +
                      (op != nullptr ? std::string(op->name) + " " : std::string()) + what);
    };
    if (op == nullptr) fail("unknown pickle opcode " + std::to_string(code));
    std::size_t at = pos + 1;  // the argument's first byte
    const auto take = [&](std::uint64_t n) {
      if (n > size - at)
        fail("claims " + std::to_string(n) + " bytes, " + std::to_string(size - at) +
             " remain in the pickle");
      at += static_cast<std::size_t>(n);
    };
    const auto line = [&] {
      const void* end = std::memchr(data + at, '\n', size - at);
      if (end == nullptr) fail("has a line that runs past the pickle's end");
      at = static_cast<std::size_t>(static_cast<const char*>(end) - data) + 1;
    };
    const auto length = [&](std::size_t bytes) {
      take(bytes);
      return little_endian(data + at - bytes, bytes);
    };
    switch (op->arg) {
      case Arg::kNone:
        break;
      case Arg::kFixed1:
        take(1);
        break;
      case Arg::kFixed2:
        take(2);
        break;
      case Arg::kFixed4:
        take(4);
        break;
      case Arg::kFixed8:
        take(8);
        break;
      case Arg::kLength1:
        take(length(1));
        break;
      case Arg::kLength4:
        take(length(4));
        break;
      case Arg::kSignedLength4: {
        const std::uint64_t n = length(4);
        if (n >= 0x80000000u) fail("has a negative length");
        take(n);
      } break;
      case Arg::kLength8:
        take(length(8));
        break;
      case Arg::kLine:
        line();
        break;
      case Arg::kTwoLines:
        line(), line();
        break;
      case Arg::kMemo4: {
        const std::uint64_t index = length(4);
        if (index >= size)
          fail("names memo entry " + std::to_string(index) + " in a pickle of " + std::to_string(size) +
               " bytes");
      } break;
    }
    // The stack: what the opcode takes must be there, above the topmost MARK.
    const std::size_t fence = marks.empty() ? 0 : marks.back();
    const auto index = [&](std::size_t bytes) { return little_endian(data + pos + 1, bytes); };
    Value pushed = Value::kOther;
    if (op->pops == kToMark) {
      if (marks.empty()) fail("has no MARK to take values to");
      const std::size_t above = stack.size() - fence;
      if ((op->rule & kPairs) != 0 && above % 2 != 0)
        fail("takes " + std::to_string(above) + " values, not pairs");
      if ((op->rule & kSome) != 0 && above == 0) fail("has no value above its MARK");
      if (op->code == 't' && above == 5 && stack[fence + 1] == Value::kStorageType)
        pushed = Value::kPersistentId;
      stack.resize(fence);
      marks.pop_back();
      const std::size_t below = stack.size() - (marks.empty() ? 0 : marks.back());
      if ((op->rule & kOnto) != 0 && below == 0) fail("has nothing below its MARK to fill");
    } else {
      const auto pops = static_cast<std::size_t>(op->pops);
      if (stack.size() - fence < pops)
        fail("takes " + std::to_string(pops) + " values, the stack holds " +
             std::to_string(stack.size() - fence) + (marks.empty() ? "" : " above its MARK"));
      const Value top = pops > 0 ? stack.back() : Value::kOther;
      const auto put = [&](std::size_t at_index) {
        if (at_index >= memo.size()) memo.resize(at_index + 1, Value::kOther);
        memo[at_index] = top;
        pushed = top;
      };
      const auto get = [&](std::size_t at_index) {
        pushed = at_index < memo.size() ? memo[at_index] : Value::kOther;
      };
      switch (op->code) {
        case 'q':
          put(index(1));
          break;
        case 'r':
          put(index(4));
          break;
        case 0x94:  // MEMOIZE: at the next index
          put(memo.size());
          break;
        case 'h':
          get(index(1));
          break;
        case 'j':
          get(index(4));
          break;
        case '2':  // DUP
          pushed = top;
          break;
        case 'c':
          pushed = storage_type(data + pos + 1, data + at) ? Value::kStorageType : Value::kOther;
          break;
        case 'Q':  // LibTorch turns the id's second value into a dtype unchecked: a stray int is no dtype
          if (top != Value::kPersistentId)
            fail("has no ('storage', torch.<Type>Storage, key, location, size) to read");
          break;
        default:
          break;
      }
      stack.resize(stack.size() - pops);
    }
    for (std::int8_t n = 0; n < op->pushes; ++n) stack.push_back(pushed);
    if ((op->rule & kMarks) != 0) marks.push_back(stack.size());
    if (op->code == '.') return;
    pos = at;
  }
  throw DataError(path + ": " + record + " ends after " + std::to_string(size) +
                  " bytes without its STOP opcode");
}

}  // namespace pcdino::train
