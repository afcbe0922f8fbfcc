//===- Passes.h - kiln passes ------------------------------------*- C++ -*-===//
//
// Declarations and registration of the passes in Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_PASSES_H
#define KILN_TRANSFORMS_PASSES_H

#include "kiln/Dialect/Kiln/IR/Kiln.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln {

#define GEN_PASS_DECL
#include "kiln/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Transforms/Passes.h.inc"

} // namespace kiln

#endif // KILN_TRANSFORMS_PASSES_H
