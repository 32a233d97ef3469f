// The device's floor for accepting work on a GPU host (issue 28): an empty
// kernel, a 4-byte memset and a 4-byte pinned copy, each N times in a row
// then one wait; a round trip (one operation and a wait); and a scan call's
// 11-operation shape, queued on a stream or launched as one CUDA graph.
// Standalone (CMake builds bench/*.cpp only):
//   nvcc -O2 -arch=sm_90 -o launch_floor bench/launch_floor.cu && ./launch_floor
// Output of one H200 host: bench/launch-floor-h200.txt.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
// never writes (a block has 32 threads): the launch alone is timed
__global__ void Empty(int* p) { if (p && threadIdx.x == 1024) *p = 1; }
__global__ void Busy(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = p[i] * 1.0001f + 1.0f; }
double Now() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* d; CK(cudaMalloc(&d, 1 << 20)); int* h; CK(cudaMallocHost(&h, 1 << 20));
  float* f; CK(cudaMalloc(&f, 64 << 20));
  const int N = 2000;
  for (int r = 0; r < 3; ++r) {
    double t = Now(); for (int i = 0; i < N; ++i) Empty<<<1, 32, 0, s>>>(d);
    CK(cudaGetLastError());
    double q = Now() - t; CK(cudaStreamSynchronize(s)); double w = Now() - t;
    std::printf("round %d: empty kernel: %.2f us to queue, %.2f us each to run\n", r, q / N, w / N);
    t = Now(); for (int i = 0; i < N; ++i) CK(cudaMemsetAsync(d, 0, 4, s)); CK(cudaStreamSynchronize(s)); w = Now() - t;
    std::printf("round %d: 4-byte memset: %.2f us each\n", r, w / N);
    t = Now(); for (int i = 0; i < N; ++i) CK(cudaMemcpyAsync(d, h, 4, cudaMemcpyHostToDevice, s)); CK(cudaStreamSynchronize(s)); w = Now() - t;
    std::printf("round %d: 4-byte pinned copy up: %.2f us each\n", r, w / N);
    t = Now(); for (int i = 0; i < 200; ++i) { Empty<<<1, 32, 0, s>>>(d); CK(cudaStreamSynchronize(s)); } w = Now() - t;
    std::printf("round %d: kernel + wait round trip: %.2f us\n", r, w / 200);
    t = Now(); for (int i = 0; i < 200; ++i) { CK(cudaMemcpyAsync(h, d, 4, cudaMemcpyDeviceToHost, s)); CK(cudaStreamSynchronize(s)); } w = Now() - t;
    std::printf("round %d: 4-byte copy down + wait: %.2f us\n", r, w / 200);
    // a scan-like sequence: copy up, memset, 7 small kernels, memset, copy down, wait
    auto seq = [&]() -> int {
      CK(cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, s));
      CK(cudaMemsetAsync(d + 2048, 0, 4, s));
      for (int k = 0; k < 7; ++k) {
        Busy<<<64, 256, 0, s>>>(f, 16384);
        CK(cudaGetLastError());
      }
      CK(cudaMemsetAsync(d + 4096, 0, 4, s));
      CK(cudaMemcpyAsync(h + 4096, d, 4096, cudaMemcpyDeviceToHost, s));
      return 0;
    };
    t = Now(); for (int i = 0; i < 200; ++i) { if (seq() != 0) return 1; CK(cudaStreamSynchronize(s)); } w = Now() - t;
    std::printf("round %d: 11-operation sequence + wait, on the stream: %.2f us\n", r, w / 200);
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    if (seq() != 0) return 1;
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    t = Now(); for (int i = 0; i < 200; ++i) { CK(cudaGraphLaunch(ge, s)); CK(cudaStreamSynchronize(s)); } w = Now() - t;
    std::printf("round %d: the same as one graph + wait: %.2f us\n", r, w / 200);
    CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
  }
  CK(cudaFree(f)); CK(cudaFreeHost(h)); CK(cudaFree(d)); CK(cudaStreamDestroy(s));
  return 0;
}
