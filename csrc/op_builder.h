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

}  // namespace fl
