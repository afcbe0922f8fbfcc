//===- OptimizerOps.cpp - optimizers' updates as element lambdas ----------===//
//
// AdamW, SGD and Adagrad: each result (the parameter, or a piece of the
// optimizer's state) at element i from the same elements of the others,
// in double as the interpreter computes them, rounded once where the op
// stores them. The terms of the step alone (bias corrections) are
// computed once per thread.
//
//===----------------------------------------------------------------------===//

#include "StructuredEmitter.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace kiln::cuda {

FailureOr<std::string> StructuredEmitter::optimizerUpdate() {
  auto adamMoments = [&](AdamWOp a, unsigned which) {
    double beta = (which == 1 ? a.getBeta1() : a.getBeta2()).convertToDouble();
    std::string g = at(a.getGrad(), "i");
    std::string m = at(which == 1 ? a.getExpAvg() : a.getExpAvgSq(), "i");
    return literal(beta) + " * " + m + " + " + literal(1.0 - beta) + " * " + g +
           (which == 2 ? " * " + g : "");
  };
  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
      .Case([&](AdamWOp a) -> FailureOr<std::string> {
        unsigned result = cast<OpResult>(value).getResultNumber();
        if (result > 0)
          return returnsExpr(adamMoments(a, result));
        std::string lr = at(a.getLr(), "0"),
                    t = "(double)" + at(a.getStep(), "0");
        std::string m = at(a.getNewExpAvg(), "i"),
                    v = at(a.getNewExpAvgSq(), "i");
        // The terms of the step alone, once per thread (two pows per
        // element would cost more than the update's memory traffic).
        std::string decay =
            w.once("double", "1.0 - " + lr + " * " +
                                 literal(a.getWeightDecay().convertToDouble()));
        std::string stepSize =
            w.once("double", lr + " / (1.0 - pow(" +
                                 literal(a.getBeta1().convertToDouble()) +
                                 ", " + t + "))");
        std::string secondCorrection =
            w.once("double", "sqrt(1.0 - pow(" +
                                 literal(a.getBeta2().convertToDouble()) +
                                 ", " + t + "))");
        return returns(
            "    const double denominator = sqrt(" + v + ") / " +
            secondCorrection + "(0) + " +
            literal(a.getEpsilon().convertToDouble()) + ";\n    return " +
            rounded(type, at(a.getParam(), "i") + " * " + decay + "(0) - " +
                              stepSize + "(0) * " + m + " / denominator") +
            ";\n");
      })
      .Case([&](SgdOp s) -> FailureOr<std::string> {
        double momentum = s.getMomentum().convertToDouble();
        std::string g = "(" + at(s.getGrad(), "i") + " + " +
                        literal(s.getWeightDecay().convertToDouble()) + " * " +
                        at(s.getParam(), "i") + ")";
        if (value == s.getNewMomentumBuffer()) {
          if (momentum == 0.0)
            return returnsExpr("0.0");
          return returnsExpr("(" + at(s.getStep(), "0") + " == 1) ? " + g +
                             " : " + literal(momentum) + " * " +
                             at(s.getMomentumBuffer(), "i") + " + " +
                             literal(1.0 - s.getDampening().convertToDouble()) +
                             " * " + g);
        }
        std::string direction = g;
        if (momentum != 0.0) {
          std::string buffer = at(s.getNewMomentumBuffer(), "i");
          direction = s.getNesterov()
                          ? g + " + " + literal(momentum) + " * " + buffer
                          : buffer;
        }
        return returnsExpr(at(s.getParam(), "i") + " - " + at(s.getLr(), "0") +
                           " * (" + direction + ")");
      })
      .Case([&](AdagradOp a) -> FailureOr<std::string> {
        std::string g = "(" + at(a.getGrad(), "i") + " + " +
                        literal(a.getWeightDecay().convertToDouble()) + " * " +
                        at(a.getParam(), "i") + ")";
        if (value == a.getNewSum())
          return returnsExpr(at(a.getSum(), "i") + " + " + g + " * " + g);
        std::string clr = at(a.getLr(), "0") + " / (1.0 + (double)(" +
                          at(a.getStep(), "0") + " - 1) * " +
                          literal(a.getLrDecay().convertToDouble()) + ")";
        return returnsExpr(at(a.getParam(), "i") + " - " + clr + " * " + g +
                           " / (sqrt(" + at(a.getNewSum(), "i") + ") + " +
                           literal(a.getEpsilon().convertToDouble()) + ")");
      })
      .Default([&](Operation *) -> FailureOr<std::string> {
        return unsupported("not an optimizer's update");
      });
}

} // namespace kiln::cuda
