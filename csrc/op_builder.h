// Building ops at compile time: validate an op against its registered signature, fill attribute
// defaults, and run shape inference over the block's VarDescs so that shape errors surface at the
// user's line, not at run time.
#pragma once
#include <map>
#include <string>

#include "desc.h"
#include "op_registry.h"

namespace fl {

// Appends (index < 0) or inserts a checked op. On any error the block is left unchanged and an
// EnforceNotMet names the op type, the slot/attribute and the creation site.
OpDesc* AppendCheckedOp(BlockDesc* block, const std::string& type, const VarNameMap& inputs, const VarNameMap& outputs,
                        std::map<std::string, Attribute> attrs, int index = -1);

// Runs the op's InferShape over VarDescs (used after backward edits descs directly, too).
void InferShapeAtCompileTime(BlockDesc* block, OpDesc* op);

// "  (op mul created at model.py:12)" suffix for error messages, or "".
std::string CreationSuffix(const OpDesc& op);

// Sub-blocks nest at most this deep (the executor recurses once per level).
constexpr int kMaxBlockDepth = 64;

// Checks one op desc against its registration, as AppendCheckedOp does when Python builds it and the executor
// does when it prepares it: slots (declared, required ones given, one variable where the slot takes one),
// attributes (the declared type, required ones set, the rules of op_registry.h), the op's Check and sub-block
// references (a block of the program nested in the op's block). `block` is the op's block when the caller knows
// it (else, for an op with a block attribute, it is looked up in the op's program). Throws EnforceNotMet naming
// the op, the slot or attribute, the value, and where the op was created.
void ValidateOpDesc(const OpInfo& info, const OpDesc& op, const BlockDesc* block = nullptr);

// A whole program, as read from bytes: its block structure (parents, forward blocks, nesting depth) and every
// op of a known type (ValidateOpDesc; an unknown type raises when the program is prepared). Throws
// EnforceNotMet naming the block and op.
void ValidateProgram(const ProgramDesc& program);

}  // namespace fl
