// RUN: kiln-compile %s --forward --target=cuda --arch=sm_80,sm_90 --attention=cudnn -o %t.kiln \
// RUN:   | FileCheck %s

// Tests that a windowed attention compiles (NVRTC, both architectures) on
// kiln's tensor-core kernels, which skip the tiles outside the window, and
// that --attention=cudnn keeps it there, saying why: cuDNN's attention
// computes no window here.
// CHECK: attention on kiln's kernels, not cuDNN: kiln.attention at {{.*}}: a sliding window
// CHECK: wrote {{.*}}.kiln
func.func @main(%q: tensor<1x2x256x64xbf16>, %k: tensor<1x2x256x64xbf16>, %v: tensor<1x2x256x64xbf16>)
    -> tensor<1x2x256x64xbf16> {
  %o, %l = kiln.attention %q, %k, %v {causal, window = array<i64: 100, -1>, scale = 0.125 : f64}
      : (tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>, tensor<1x2x256x64xbf16>)
      -> (tensor<1x2x256x64xbf16>, tensor<1x2x256xf32>)
  return %o : tensor<1x2x256x64xbf16>
}
