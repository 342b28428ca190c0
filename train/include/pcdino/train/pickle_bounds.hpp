// The bounds of a checkpoint's pickle, checked before LibTorch's unpickler reads it (issue #73). The
// unpickler allocates what an opcode claims before it reads: a string of the length a BINUNICODE says
// (std::string::resize, every byte zeroed) and memo entries up to the index a LONG_BINPUT names, so a
// damaged 100 KB data.pkl made it zero 4 GB; and it trusts its stack and the values on it, so another
// crashed it (Checkpoint.DamagedCheckpointsAreEachReadOrRefusedNamingTheFile, bench/RESULTS.md).
#pragma once

#include <cstddef>
#include <string>

namespace pcdino::train {

/// Walks the opcodes of the pickle `data` (`size` bytes; protocols 0-5, each opcode's argument as CPython's
/// Lib/pickletools.py describes it) and checks, without building anything: every argument lies inside the
/// pickle (a length-prefixed string or bytes claims at most what follows it, a line ends before the pickle
/// does), a LONG_BINPUT's memo index is below the pickle's size (a pickle of n bytes puts at most n / 2
/// values), every opcode finds what it takes on the stack above the topmost MARK (pickletools'
/// stack_before; DICT and SETITEMS take pairs), a BINPERSID's persistent id is a 5-tuple whose second value
/// is a torch.<Type>Storage global (LibTorch casts it to a dtype unchecked), and the pickle ends with STOP.
/// Throws DataError naming `path`, the `record` ("data.pkl"), the byte offset in it and the opcode; an
/// unknown opcode is refused the same way.
void check_pickle_bounds(const char* data, std::size_t size, const std::string& path,
                         const std::string& record = "data.pkl");

}  // namespace pcdino::train
