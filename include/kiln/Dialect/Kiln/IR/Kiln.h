//===- Kiln.h - the kiln dialect ---------------------------------*- C++ -*-===//
//
// Declares the kiln dialect, its enums and its ops.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILN_IR_KILN_H
#define KILN_DIALECT_KILN_IR_KILN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/Kiln/IR/KilnOpsDialect.h.inc"
#include "kiln/Dialect/Kiln/IR/KilnEnums.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.h.inc"

#endif // KILN_DIALECT_KILN_IR_KILN_H
