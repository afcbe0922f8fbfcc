// RUN: kiln-opt %s -split-input-file --kiln-rewrite-attention | FileCheck %s
// RUN: kiln-opt %s -split-input-file --kiln-rewrite-attention -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WHY --implicit-check-not=remark:
//
// Each attention left as exported ops says why in a remark (WHY); a softmax
// that is no attention says nothing.
//
// Every function here also runs before and after the rewrite on random
// inputs in unittests/Transforms/PatternRewriteTest.cpp.

// GPT-2 eager (both exporters): scale after the product, a constant causal
// mask of finfo.min: the mask becomes the causal flag, the probabilities
// are never stored.
// CHECK-LABEL: func @gpt2_eager
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NOT: kiln.constant
// CHECK-NOT: kiln.softmax
// CHECK: %[[O:.*]], %{{.*}} = kiln.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
// CHECK-NEXT: return %[[O]]
func.func @gpt2_eager(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %scale = kiln.constant dense<0.25> : tensor<f32>
  %mask = kiln.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = kiln.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = kiln.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.add %ss, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// GPT-2 124M's export: the causal mask is built in the graph, a constant
// boolean triangle broadcast over the batch and turned into an additive
// mask, `where(keep, 0, finfo.min)`, which both layers add. Constants alone
// compute it, so it is evaluated: exactly causal, it becomes the flag, and
// once no layer reads it, it goes.
// CHECK-LABEL: func @gpt2_built_mask
// CHECK-NOT: kiln.where
// CHECK-NOT: kiln.broadcast
// CHECK: kiln.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f64}
// CHECK: kiln.attention %{{.*}}, %arg1, %arg2 {causal, scale = 2.500000e-01 : f64}
func.func @gpt2_built_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %triangle = kiln.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %scale = kiln.constant dense<0.25> : tensor<f32>
  %keep = kiln.broadcast %triangle : tensor<1x1x4x4xi1> to tensor<2x1x4x4xi1>
  %mask = kiln.where %keep, %zero, %lowest : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss = kiln.mul %s, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %sm = kiln.add %ss, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  %s2 = kiln.matmul %o, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss2 = kiln.mul %s2, %scale : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %sm2 = kiln.add %ss2, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p2 = kiln.softmax %sm2 {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o2 = kiln.matmul %p2, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o2 : tensor<2x2x4x8xf32>
}

// -----

// A mask built the same way that keeps the upper triangle (each query the
// keys at or after it) is a window with no bound on the right.
// CHECK-LABEL: func @built_mask_not_causal
// CHECK-NOT: kiln.where
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f64, window = array<i64: 0, -1>}
func.func @built_mask_not_causal(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %triangle = kiln.constant dense<[[[[true, true, true, true], [false, true, true, true], [false, false, true, true], [false, false, false, true]]]]> : tensor<1x1x4x4xi1>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %keep = kiln.broadcast %triangle : tensor<1x1x4x4xi1> to tensor<2x1x4x4xi1>
  %mask = kiln.where %keep, %zero, %lowest : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<2x1x4x4xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %sm = kiln.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// SDPA (TorchScript): q and k each scaled by sqrt(scale) before the
// product, a -inf causal mask, and the NaN guard on the probabilities. The
// scale is the product of the two, rounded to f32 like the scores.
// CHECK-LABEL: func @sdpa
// CHECK-NOT: kiln.is_nan
// CHECK: kiln.attention %arg0, %arg1, %arg2 {causal, scale = 0.1249999925494194 : f64}
// CHECK-NOT: kiln.softmax
func.func @sdpa(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %c = kiln.constant dense<0.353553385> : tensor<f32>
  %zero = kiln.constant dense<0.0> : tensor<1xf32>
  %mask = kiln.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %qs = kiln.mul %q, %c : (tensor<1x2x4x8xf32>, tensor<f32>) -> tensor<1x2x4x8xf32>
  %ks = kiln.mul %kt, %c : (tensor<1x2x8x4xf32>, tensor<f32>) -> tensor<1x2x8x4xf32>
  %s = kiln.matmul %qs, %ks : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %nan = kiln.is_nan %p : tensor<1x2x4x4xf32>
  %pg = kiln.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<1xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = kiln.matmul %pg, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Multi-query attention by broadcasting (Falcon's): one key/value head
// [B, 1, T, D] that both products broadcast over the query heads is read
// as it is, the grouped-query case of a single group.
// CHECK-LABEL: func @multi_query_broadcast
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x4x8xf32>, %[[K:.*]]: tensor<1x1x4x8xf32>, %[[V:.*]]: tensor<1x1x4x8xf32>)
// CHECK-NOT: kiln.softmax
// CHECK: kiln.attention %[[Q]], %[[K]], %[[V]] {scale = 2.500000e-01 : f64} : (tensor<1x4x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4xf32>)
func.func @multi_query_broadcast(%q: tensor<1x4x4x8xf32>, %k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %scale = kiln.constant dense<0.25> : tensor<f32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x1x4x8xf32>) -> tensor<1x1x8x4xf32>
  %s = kiln.matmul %q, %kt : (tensor<1x4x4x8xf32>, tensor<1x1x8x4xf32>) -> tensor<1x4x4x4xf32>
  %ss = kiln.mul %s, %scale : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %ss {axis = 3 : i64} : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x4x4x4xf32>, tensor<1x1x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// Llama: division by sqrt(d), masked_fill(triu, -inf) as a where whose
// condition marks the dropped keys, and 2 key/value heads repeated for 4
// query heads: attention reads the 2 heads directly.
// CHECK-LABEL: func @llama_grouped_query
// CHECK-SAME: (%[[Q:.*]]: tensor<1x4x4x8xf32>, %[[K:.*]]: tensor<1x2x4x8xf32>, %[[V:.*]]: tensor<1x2x4x8xf32>)
// CHECK-NOT: kiln.broadcast
// CHECK: kiln.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.35355338454246521 : f64} : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4xf32>)
func.func @llama_grouped_query(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %d = kiln.constant dense<2.82842708> : tensor<f32>
  %inf = kiln.constant dense<0xFF800000> : tensor<f32>
  %drop = kiln.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %k1 = kiln.reshape %k : tensor<1x2x4x8xf32> to tensor<1x2x1x4x8xf32>
  %k2 = kiln.broadcast %k1 : tensor<1x2x1x4x8xf32> to tensor<1x2x2x4x8xf32>
  %kr = kiln.reshape %k2 : tensor<1x2x2x4x8xf32> to tensor<1x4x4x8xf32>
  %v1 = kiln.reshape %v : tensor<1x2x4x8xf32> to tensor<1x2x1x4x8xf32>
  %v2 = kiln.broadcast %v1 : tensor<1x2x1x4x8xf32> to tensor<1x2x2x4x8xf32>
  %vr = kiln.reshape %v2 : tensor<1x2x2x4x8xf32> to tensor<1x4x4x8xf32>
  %kt = kiln.transpose %kr {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x4x4x8xf32>) -> tensor<1x4x8x4xf32>
  %s = kiln.matmul %q, %kt : (tensor<1x4x4x8xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x4x4xf32>
  %ss = kiln.div %s, %d : (tensor<1x4x4x4xf32>, tensor<f32>) -> tensor<1x4x4x4xf32>
  %sm = kiln.where %drop, %inf, %ss : (tensor<4x4xi1>, tensor<f32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x4x4x4xf32>
  %o = kiln.matmul %p, %vr : (tensor<1x4x4x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x4x8xf32>
  return %o : tensor<1x4x4x8xf32>
}

// -----

// BERT: a padding mask computed from an input, added to the scores, stays
// an additive mask operand; the product reads k through transpose_rhs.
// CHECK-LABEL: func @bert_padding
// CHECK: %[[M:.*]] = kiln.mul
// CHECK: kiln.attention %arg0, %arg1, %arg2 mask %[[M]] {scale = 1.250000e-01 : f64} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x1x1x4xf32>)
func.func @bert_padding(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %keep: tensor<2x1x1x4xf32>) -> tensor<2x2x4x8xf32> {
  %c = kiln.constant dense<0.125> : tensor<f32>
  %one = kiln.constant dense<1.0> : tensor<f32>
  %min = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %inverted = kiln.sub %one, %keep : (tensor<f32>, tensor<2x1x1x4xf32>) -> tensor<2x1x1x4xf32>
  %mask = kiln.mul %inverted, %min : (tensor<2x1x1x4xf32>, tensor<f32>) -> tensor<2x1x1x4xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %ss = kiln.mul %c, %s : (tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %sm = kiln.add %mask, %ss : (tensor<2x1x1x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// GPT-J (and hand-written models): the scores masked with -1e9 by a
// constant triangle, then divided by the scale. Masked and scaled, -1e9 is
// still excluded: the causal flag.
// CHECK-LABEL: func @masked_then_scaled
// CHECK: kiln.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f64}
// CHECK-NOT: kiln.softmax
func.func @masked_then_scaled(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %tril = kiln.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %masked_bias = kiln.parameter "h.0.attn.masked_bias" = dense<-1.0E+9> : tensor<f32> : tensor<f32>
  %c = kiln.constant dense<4.0> : tensor<f32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m = kiln.where %tril, %s, %masked_bias : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.div %m, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// HF's GPT-J and CodeGen: an additive mask from an input, then the division
// by the scale, which attention applies to the mask too.
// CHECK-LABEL: func @bias_then_scaled
// CHECK: %[[C:.*]] = kiln.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[M:.*]] = kiln.mul %arg3, %[[C]]
// CHECK: kiln.attention %arg0, %arg1, %arg2 mask %[[M]] {scale = 2.500000e-01 : f64}
func.func @bias_then_scaled(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %mask: tensor<2x1x4x4xf32>) -> tensor<2x2x4x8xf32> {
  %c = kiln.constant dense<4.0> : tensor<f32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %b = kiln.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %sm = kiln.div %b, %c : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Not rewritten: a negative scale after the mask would turn dropped scores
// into the largest.
// CHECK-LABEL: func @masked_then_negated
// CHECK-NOT: kiln.attention
// WHY: remark: attention kept as exported ops: masked scores scaled by a factor that is not positive
func.func @masked_then_negated(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %keep: tensor<1x1x4x4xi1>) -> tensor<1x2x4x8xf32> {
  %min = kiln.constant dense<-1.0E+9> : tensor<f32>
  %c = kiln.constant dense<-1.0> : tensor<f32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m = kiln.where %keep, %s, %min : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.mul %m, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// A boolean mask from an input (true: the key takes part), applied with
// where(keep, scores, lowest), and dropout on the probabilities: attention
// draws the same dropout mask from the same seed.
// CHECK-LABEL: func @boolean_mask_dropout
// CHECK: %[[KEEP:.*]] = kiln.or
// CHECK: kiln.attention %arg0, %arg1, %arg2 mask %[[KEEP]] {dropout_ratio = 1.000000e-01 : f64, scale = 1.000000e+00 : f64, seed = 7 : i64}
// CHECK-NOT: kiln.dropout
func.func @boolean_mask_dropout(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x4xi1>) -> tensor<1x2x4x8xf32> {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %diagonal = kiln.constant dense<[[true, false, false, false], [false, true, false, false], [false, false, true, false], [false, false, false, true]]> : tensor<4x4xi1>
  %keep = kiln.or %m, %diagonal : (tensor<1x1x4x4xi1>, tensor<4x4xi1>) -> tensor<1x1x4x4xi1>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = kiln.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.where %keep, %s, %lowest : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %pd, %dropped = kiln.dropout %p {ratio = 0.1 : f64, seed = 7 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %pd, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// dynamo lifts the scale into a scalar initializer; one that autodiff will
// not train (scalars are not, by default) is read as a literal. A constant
// all-zero mask (BERT without padding) disappears.
// CHECK-LABEL: func @lifted_scale_zero_mask
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.250000e-01 : f64}
func.func @lifted_scale_zero_mask(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %c = kiln.parameter "val_57" = dense<0.125> : tensor<f32> : tensor<f32>
  %mask = kiln.constant dense<0.0> : tensor<1x1x4x4xf32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  %s = kiln.matmul %q, %kt : (tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = kiln.mul %s, %c : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.add %ss, %mask : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// dynamo folds a mask computed from constants into an initializer named
// after its last op, which autodiff does not train: an all-zero one (BERT
// without padding) disappears, one with excluded keys is the mask.
// CHECK-LABEL: func @folded_zero_mask
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f64}
func.func @folded_zero_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %mask = kiln.parameter "where" = dense<0.0> : tensor<2x1x4x4xf32> : tensor<2x1x4x4xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %sm = kiln.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// CHECK-LABEL: func @folded_padding_mask
// CHECK: %[[MASK:.*]] = kiln.parameter "where_3"
// CHECK: kiln.attention %arg0, %arg1, %arg2 mask %[[MASK]] {scale = 1.000000e+00 : f64}
func.func @folded_padding_mask(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %mask = kiln.parameter "where_3" = dense<[[[[0.0, 0.0, 0.0, -3.40282347E+38]]], [[[0.0, 0.0, -3.40282347E+38, -3.40282347E+38]]]]> : tensor<2x1x1x4xf32> : tensor<2x1x1x4xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %sm = kiln.add %s, %mask : (tensor<2x2x4x4xf32>, tensor<2x1x1x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// A constant mask that keeps a band of keys around the diagonal becomes a
// window whose kernels skip the tiles outside it: a sliding window (causal,
// one key back: Mistral's, Gemma's local layers) and a band one key either
// side (ModernBERT's local attention), as a bias of 0 and the lowest score.
// A constant mask with a hole is no band and stays a mask.
// CHECK-LABEL: func @windows
// CHECK-NOT: kiln.softmax
// CHECK: kiln.attention %arg0, %arg1, %arg2 {causal, scale = 1.000000e+00 : f64, window = array<i64: 1, -1>}
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f64, window = array<i64: 1, 1>}
// CHECK: kiln.attention %arg0, %arg1, %arg2 mask %{{.*}} {scale = 1.000000e+00 : f64}
func.func @windows(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>)
    -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
  %sliding = kiln.constant dense<[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]> : tensor<4x4xi1>
  %band = kiln.constant dense<[[true, true, false, false], [true, true, true, false], [false, true, true, true], [false, false, true, true]]> : tensor<4x4xi1>
  %holes = kiln.constant dense<[[true, false, true, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]> : tensor<4x4xi1>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %s1 = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m1 = kiln.where %sliding, %s1, %lowest : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p1 = kiln.softmax %m1 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o1 = kiln.matmul %p1, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %bias = kiln.where %band, %zero, %lowest : (tensor<4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  %s2 = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m2 = kiln.add %s2, %bias : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p2 = kiln.softmax %m2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o2 = kiln.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %s3 = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m3 = kiln.where %holes, %s3, %lowest : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p3 = kiln.softmax %m3 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o3 = kiln.matmul %p3, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o1, %o2, %o3 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// A constant mask that keeps every key disappears with more queries than
// keys too (cross-attention).
// CHECK-LABEL: func @keeps_all_of_fewer_keys
// CHECK: kiln.attention %arg0, %arg1, %arg2 {scale = 1.000000e+00 : f64}
func.func @keeps_all_of_fewer_keys(%q: tensor<1x2x6x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x6x8xf32> {
  %all = kiln.constant dense<true> : tensor<6x4xi1>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x6x4xf32>
  %m = kiln.where %all, %s, %lowest : (tensor<6x4xi1>, tensor<1x2x6x4xf32>, tensor<f32>) -> tensor<1x2x6x4xf32>
  %p = kiln.softmax %m {axis = 3 : i64} : tensor<1x2x6x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x6x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x6x8xf32>
  return %o : tensor<1x2x6x8xf32>
}

// -----

// A padding mask that a constant band fills with the lowest score outside
// it (ModernBERT's local layers: masked_fill(~window, finfo.min)) is the
// window and the padding mask, which stays attention's mask.
// CHECK-LABEL: func @band_of_padding
// CHECK-NOT: kiln.where
// CHECK: kiln.attention %arg0, %arg1, %arg2 mask %arg3 {scale = 1.000000e+00 : f64, window = array<i64: 1, 1>}
func.func @band_of_padding(%q: tensor<2x2x4x8xf32>, %k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %padding: tensor<2x1x1x4xf32>)
    -> tensor<2x2x4x8xf32> {
  %band = kiln.constant dense<[[true, true, false, false], [true, true, true, false], [false, true, true, true], [false, false, true, true]]> : tensor<4x4xi1>
  %outside = kiln.not %band : tensor<4x4xi1>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %local = kiln.where %outside, %lowest, %padding : (tensor<4x4xi1>, tensor<f32>, tensor<2x1x1x4xf32>) -> tensor<2x1x4x4xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x4xf32>
  %sm = kiln.add %s, %local : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x4x8xf32>
  return %o : tensor<2x2x4x8xf32>
}

// -----

// Gemma 2's soft cap of the scaled scores, tanh(s / c) * c before the mask,
// is attention's softcap. A mask inside the cap, or a scale of the capped
// scores, is no attention kiln.attention computes.
// CHECK-LABEL: func @softcap
// CHECK: kiln.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f64, softcap = 5.000000e+01 : f64}
// CHECK-COUNT-2: kiln.softmax
// WHY: remark: attention kept as exported ops: a mask inside the soft cap
// WHY: remark: attention kept as exported ops: a scale of the soft-capped scores
func.func @softcap(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>)
    -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {
  %triangle = kiln.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = kiln.where %triangle, %zero, %lowest : (tensor<4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<4x4xf32>
  %scale = kiln.constant dense<0.25> : tensor<f32>
  %cap = kiln.constant dense<50.0> : tensor<f32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %ss = kiln.mul %s, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %d = kiln.div %ss, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %t = kiln.tanh %d : tensor<1x2x4x4xf32>
  %c = kiln.mul %t, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = kiln.add %c, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %m {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %s2 = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %m2 = kiln.add %s2, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %d2 = kiln.div %m2, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %t2 = kiln.tanh %d2 : tensor<1x2x4x4xf32>
  %c2 = kiln.mul %t2, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p2 = kiln.softmax %c2 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o2 = kiln.matmul %p2, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %s3 = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %d3 = kiln.div %s3, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %t3 = kiln.tanh %d3 : tensor<1x2x4x4xf32>
  %c3 = kiln.mul %t3, %cap : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %sc3 = kiln.mul %c3, %scale : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p3 = kiln.softmax %sc3 {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o3 = kiln.matmul %p3, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o, %o2, %o3 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// Not rewritten: the probabilities are also returned (output_attentions),
// so they must be stored anyway.
// CHECK-LABEL: func @probabilities_returned
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax
// WHY: remark: attention kept as exported ops: its probabilities are also read elsewhere (returned attention weights)
func.func @probabilities_returned(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %s {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o, %p : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// A trained parameter added to the scores (a learned position bias, T5's
// and Swin's) is attention's mask, whose gradient attention_grad gives.
// CHECK-LABEL: func @learned_bias
// CHECK: %[[BIAS:.*]] = kiln.parameter "relative_bias"
// CHECK-NOT: kiln.softmax
// CHECK: kiln.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[BIAS]] {scale = 1.000000e+00 : f64}
func.func @learned_bias(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %bias = kiln.parameter "relative_bias" = dense<0.5> : tensor<2x4x4xf32> : tensor<2x4x4xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.add %s, %bias : (tensor<1x2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Not rewritten: a boolean mask that a trained parameter decides (a learned
// gate) is left to the ops that spell it out.
// CHECK-LABEL: func @learned_keep
// CHECK-NOT: kiln.attention
// WHY: remark: attention kept as exported ops: a boolean mask that a trained parameter decides
func.func @learned_keep(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %gate = kiln.parameter "gate" = dense<0.5> : tensor<4x4xf32> : tensor<4x4xf32>
  %zero = kiln.constant dense<0.0> : tensor<f32>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %keep = kiln.compare gt, %gate, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %sm = kiln.where %keep, %s, %lowest : (tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Not rewritten: the softmax is over the queries, not the keys; and a
// softmax whose result is not multiplied by values.
// CHECK-LABEL: func @not_attention
// CHECK-NOT: kiln.attention
func.func @not_attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) {
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %s {axis = 2 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %t = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %r = kiln.softmax %t {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %e = kiln.exp %r : tensor<1x2x4x4xf32>
  return %o, %e : tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>
}

// -----

// Not rewritten: the scale is a tensor, not one number.
// CHECK-LABEL: func @tensor_scale
// CHECK-NOT: kiln.attention
// WHY: remark: attention kept as exported ops: its scores pass through ops the rewrite does not look through
func.func @tensor_scale(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %c = kiln.constant dense<[[[[1.0]], [[0.5]]]]> : tensor<1x2x1x1xf32>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %ss = kiln.mul %s, %c : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %p = kiln.softmax %ss {axis = 3 : i64} : tensor<1x2x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Heads flattened into the batch of 3-D products (OPT, BART): the query
// scaled before the bmm, the scores viewed as [B, H, Tq, Tk] to add the
// padding mask and back to [B * H, Tq, Tk] for the softmax. The operands
// are split into heads again, and the output merged for the reshape after.
// CHECK-LABEL: func @heads_in_the_batch
// CHECK-SAME: (%[[Q:.*]]: tensor<4x3x8xf32>, %[[K:.*]]: tensor<4x5x8xf32>, %[[V:.*]]: tensor<4x5x8xf32>, %[[M:.*]]: tensor<2x1x3x5xf32>)
// CHECK-NOT: kiln.softmax
// CHECK-DAG: %[[Q4:.*]] = kiln.reshape %[[Q]] : tensor<4x3x8xf32> to tensor<2x2x3x8xf32>
// CHECK-DAG: %[[K4:.*]] = kiln.reshape %[[K]] : tensor<4x5x8xf32> to tensor<2x2x5x8xf32>
// CHECK-DAG: %[[V4:.*]] = kiln.reshape %[[V]] : tensor<4x5x8xf32> to tensor<2x2x5x8xf32>
// CHECK: %[[O:.*]], %{{.*}} = kiln.attention %[[Q4]], %[[K4]], %[[V4]] mask %[[M]] {scale = 2.500000e-01 : f64}
// CHECK: kiln.reshape %[[O]] : tensor<2x2x3x8xf32> to tensor<4x3x8xf32>
func.func @heads_in_the_batch(%q: tensor<4x3x8xf32>, %k: tensor<4x5x8xf32>, %v: tensor<4x5x8xf32>, %m: tensor<2x1x3x5xf32>) -> tensor<4x3x8xf32> {
  %scale = kiln.constant dense<0.25> : tensor<f32>
  %qs = kiln.mul %q, %scale : (tensor<4x3x8xf32>, tensor<f32>) -> tensor<4x3x8xf32>
  %s = kiln.matmul %qs, %k {transpose_rhs} : (tensor<4x3x8xf32>, tensor<4x5x8xf32>) -> tensor<4x3x5xf32>
  %s4 = kiln.reshape %s : tensor<4x3x5xf32> to tensor<2x2x3x5xf32>
  %sm = kiln.add %s4, %m : (tensor<2x2x3x5xf32>, tensor<2x1x3x5xf32>) -> tensor<2x2x3x5xf32>
  %s3 = kiln.reshape %sm : tensor<2x2x3x5xf32> to tensor<4x3x5xf32>
  %p = kiln.softmax %s3 {axis = 2 : i64} : tensor<4x3x5xf32>
  %o = kiln.matmul %p, %v : (tensor<4x3x5xf32>, tensor<4x5x8xf32>) -> tensor<4x3x8xf32>
  return %o : tensor<4x3x8xf32>
}

// -----

// 3-D throughout, without a mask (Whisper's encoder): each batch entry is
// one head.
// CHECK-LABEL: func @three_d
// CHECK: kiln.attention {{.*}} {scale = 1.000000e+00 : f64} : (tensor<6x1x4x8xf32>, tensor<6x1x4x8xf32>, tensor<6x1x4x8xf32>) -> (tensor<6x1x4x8xf32>, tensor<6x1x4xf32>)
func.func @three_d(%q: tensor<6x4x8xf32>, %k: tensor<6x4x8xf32>, %v: tensor<6x4x8xf32>) -> tensor<6x4x8xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<6x4x8xf32>, tensor<6x4x8xf32>) -> tensor<6x4x4xf32>
  %p = kiln.softmax %s {axis = 2 : i64} : tensor<6x4x4xf32>
  %o = kiln.matmul %p, %v : (tensor<6x4x4xf32>, tensor<6x4x8xf32>) -> tensor<6x4x8xf32>
  return %o : tensor<6x4x8xf32>
}

// -----

// BLOOM without padding: ALiBi's bias over key positions, one row per
// flattened head ([B * H, 1, Tk]), added to the 3-D scores, then a
// constant causal mask on the 4-D view: the bias split as the heads, the
// mask the causal flag.
// CHECK-LABEL: func @alibi_causal
// CHECK: %[[B:.*]] = kiln.reshape %arg3 : tensor<4x1x4xf32> to tensor<2x2x1x4xf32>
// CHECK: kiln.attention {{.*}} mask %[[B]] {causal, scale = 0.35355338454246521 : f64}
func.func @alibi_causal(%q: tensor<4x4x8xf32>, %kt: tensor<4x8x4xf32>, %v: tensor<4x4x8xf32>, %alibi: tensor<4x1x4xf32>) -> tensor<4x4x8xf32> {
  %alpha = kiln.constant dense<0.353553385> : tensor<f32>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %drop = kiln.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %s = kiln.matmul %q, %kt : (tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> tensor<4x4x4xf32>
  %ss = kiln.mul %s, %alpha : (tensor<4x4x4xf32>, tensor<f32>) -> tensor<4x4x4xf32>
  %sb = kiln.add %ss, %alibi : (tensor<4x4x4xf32>, tensor<4x1x4xf32>) -> tensor<4x4x4xf32>
  %s4 = kiln.reshape %sb : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %sm = kiln.where %drop, %lowest, %s4 : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %p3 = kiln.reshape %p : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %o = kiln.matmul %p3, %v : (tensor<4x4x4xf32>, tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
  return %o : tensor<4x4x8xf32>
}

// -----

// With padding, BLOOM's boolean mask depends on the input: a left-padded
// row may drop every key, which the exported softmax weighs equally and
// kiln.attention makes 0. It stays as exported.
// CHECK-LABEL: func @alibi_padding
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax
// WHY: remark: attention kept as exported ops: a bias with a boolean mask that inputs decide (a row that drops every key would differ)
func.func @alibi_padding(%q: tensor<4x4x8xf32>, %kt: tensor<4x8x4xf32>, %v: tensor<4x4x8xf32>, %alibi: tensor<4x1x4xf32>, %drop: tensor<2x1x4x4xi1>) -> tensor<4x4x8xf32> {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %s = kiln.matmul %q, %kt : (tensor<4x4x8xf32>, tensor<4x8x4xf32>) -> tensor<4x4x4xf32>
  %sb = kiln.add %s, %alibi : (tensor<4x4x4xf32>, tensor<4x1x4xf32>) -> tensor<4x4x4xf32>
  %s4 = kiln.reshape %sb : tensor<4x4x4xf32> to tensor<2x2x4x4xf32>
  %sm = kiln.where %drop, %lowest, %s4 : (tensor<2x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x2x4x4xf32>
  %p3 = kiln.reshape %p : tensor<2x2x4x4xf32> to tensor<4x4x4xf32>
  %o = kiln.matmul %p3, %v : (tensor<4x4x4xf32>, tensor<4x4x8xf32>) -> tensor<4x4x8xf32>
  return %o : tensor<4x4x8xf32>
}

// -----

// GPTBigCode's multi-query attention: the queries of a position's heads
// are rows of one 3-D product with the single key head ([B, Tq * H, D] x
// [B, D, Tk], baddbmm adding beta * empty, zeros), viewed as [B, Tq, H, Tk]
// for the padding mask and the softmax, and back for the product with the
// single value head. Queries become [B, H, Tq, D], the key and value heads
// [B, 1, T, D] (the key's transpose looked through), the mask heads first;
// the output goes back to its rows.
// CHECK-LABEL: func @rows_multi_query
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x8xf32>, %[[K:.*]]: tensor<2x4x8xf32>, %[[V:.*]]: tensor<2x4x8xf32>, %[[KEEP:.*]]: tensor<2x4x1x4xi1>)
// CHECK-NOT: kiln.softmax
// CHECK-DAG: %[[QS:.*]] = kiln.reshape %[[Q]] : tensor<2x8x8xf32> to tensor<2x4x2x8xf32>
// CHECK-DAG: %[[QH:.*]] = kiln.transpose %[[QS]] {permutation = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[KH:.*]] = kiln.reshape %[[K]] : tensor<2x4x8xf32> to tensor<2x1x4x8xf32>
// CHECK-DAG: %[[VH:.*]] = kiln.reshape %[[V]] : tensor<2x4x8xf32> to tensor<2x1x4x8xf32>
// CHECK-DAG: %[[MH:.*]] = kiln.transpose %[[KEEP]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x1x4xi1>) -> tensor<2x1x4x4xi1>
// CHECK: %[[O:.*]], %{{.*}} = kiln.attention %[[QH]], %[[KH]], %[[VH]] mask %[[MH]] {scale = 2.500000e-01 : f64} : (tensor<2x2x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x4xi1>)
// CHECK: %[[OT:.*]] = kiln.transpose %[[O]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x8xf32>) -> tensor<2x4x2x8xf32>
// CHECK: kiln.reshape %[[OT]] : tensor<2x4x2x8xf32> to tensor<2x8x8xf32>
func.func @rows_multi_query(%q: tensor<2x8x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %keep: tensor<2x4x1x4xi1>) -> tensor<2x8x8xf32> {
  %alpha = kiln.constant dense<0.25> : tensor<f32>
  %zeros = kiln.constant dense<0.0> : tensor<2x8x4xf32>
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %kt = kiln.transpose %k {permutation = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %s = kiln.matmul %q, %kt : (tensor<2x8x8xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %ss = kiln.mul %s, %alpha : (tensor<2x8x4xf32>, tensor<f32>) -> tensor<2x8x4xf32>
  %sb = kiln.add %ss, %zeros : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %s4 = kiln.reshape %sb : tensor<2x8x4xf32> to tensor<2x4x2x4xf32>
  %sm = kiln.where %keep, %s4, %lowest : (tensor<2x4x1x4xi1>, tensor<2x4x2x4xf32>, tensor<f32>) -> tensor<2x4x2x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<2x4x2x4xf32>
  %p3 = kiln.reshape %p : tensor<2x4x2x4xf32> to tensor<2x8x4xf32>
  %o = kiln.matmul %p3, %v : (tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}

// -----

// The same layout with GPTBigCode's constant causal buffer over [B, Tq, H,
// Tk] ([1, Tq, 1, Tk]): read heads first, it keeps the causal band.
// CHECK-LABEL: func @rows_causal
// CHECK-NOT: kiln.softmax
// CHECK: kiln.attention {{.*}} {causal, scale = 1.000000e+00 : f64} : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
func.func @rows_causal(%q: tensor<1x8x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x8x8xf32> {
  %lowest = kiln.constant dense<-3.40282347E+38> : tensor<f32>
  %keep = kiln.constant dense<[[[[true, false, false, false]], [[true, true, false, false]], [[true, true, true, false]], [[true, true, true, true]]]]> : tensor<1x4x1x4xi1>
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x8x8xf32>, tensor<1x4x8xf32>) -> tensor<1x8x4xf32>
  %s4 = kiln.reshape %s : tensor<1x8x4xf32> to tensor<1x4x2x4xf32>
  %sm = kiln.where %keep, %s4, %lowest : (tensor<1x4x1x4xi1>, tensor<1x4x2x4xf32>, tensor<f32>) -> tensor<1x4x2x4xf32>
  %p = kiln.softmax %sm {axis = 3 : i64} : tensor<1x4x2x4xf32>
  %p3 = kiln.reshape %p : tensor<1x4x2x4xf32> to tensor<1x8x4xf32>
  %o = kiln.matmul %p3, %v : (tensor<1x8x4xf32>, tensor<1x4x8xf32>) -> tensor<1x8x8xf32>
  return %o : tensor<1x8x8xf32>
}

// -----

// A bias over all of the 3-D rows ([1, Tq * H, Tk]) with the softmax on
// the 4-D view: split like the rows, then heads first.
// CHECK-LABEL: func @rows_bias
// CHECK: %[[B4:.*]] = kiln.reshape %arg3 : tensor<1x8x4xf32> to tensor<1x4x2x4xf32>
// CHECK: %[[BH:.*]] = kiln.transpose %[[B4]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: kiln.attention {{.*}} mask %[[BH]] {scale = 1.000000e+00 : f64} : (tensor<2x2x4x8xf32>, tensor<2x1x4x8xf32>, tensor<2x1x4x8xf32>, tensor<1x2x4x4xf32>)
func.func @rows_bias(%q: tensor<2x8x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>, %bias: tensor<1x8x4xf32>) -> tensor<2x8x8xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<2x8x8xf32>, tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  %sb = kiln.add %s, %bias : (tensor<2x8x4xf32>, tensor<1x8x4xf32>) -> tensor<2x8x4xf32>
  %s4 = kiln.reshape %sb : tensor<2x8x4xf32> to tensor<2x4x2x4xf32>
  %p = kiln.softmax %s4 {axis = 3 : i64} : tensor<2x4x2x4xf32>
  %p3 = kiln.reshape %p : tensor<2x4x2x4xf32> to tensor<2x8x4xf32>
  %o = kiln.matmul %p3, %v : (tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
  return %o : tensor<2x8x8xf32>
}

// -----

// Dropout of the row layout's probabilities draws in [B, Tq, H, Tk] order,
// kiln.attention's in [B, H, Tq, Tk]: it stays as exported.
// CHECK-LABEL: func @rows_dropout
// CHECK-NOT: kiln.attention
// CHECK: kiln.softmax
// WHY: remark: attention kept as exported ops: dropout of probabilities with the heads in the query rows
func.func @rows_dropout(%q: tensor<1x8x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x8x8xf32> {
  %s = kiln.matmul %q, %k {transpose_rhs} : (tensor<1x8x8xf32>, tensor<1x4x8xf32>) -> tensor<1x8x4xf32>
  %s4 = kiln.reshape %s : tensor<1x8x4xf32> to tensor<1x4x2x4xf32>
  %p = kiln.softmax %s4 {axis = 3 : i64} : tensor<1x4x2x4xf32>
  %pd, %dropped = kiln.dropout %p {ratio = 0.1 : f64, seed = 7 : i64} : tensor<1x4x2x4xf32>
  %p3 = kiln.reshape %pd : tensor<1x4x2x4xf32> to tensor<1x8x4xf32>
  %o = kiln.matmul %p3, %v : (tensor<1x8x4xf32>, tensor<1x4x8xf32>) -> tensor<1x8x8xf32>
  return %o : tensor<1x8x8xf32>
}
