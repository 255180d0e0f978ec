// One graph of torch.compile run as ONE PJRT execute per call (issue 5).
//
// The first call of a graph (torchtpu/_dynamo.py) runs its ATen nodes through
// the ordinary kernels in fused mode while the device's Fusion takes a capture
// (runtime/capture.h). CompiledCall::end turns that capture into a replay
// recipe: what each input must look like (dtype, sizes, strides, storage
// offset and size, which inputs share a buffer) and where each output comes
// from (a program output, an input's storage, or an empty tensor), with its view
// geometry. Later calls with matching inputs run replay(): argument buffers
// gathered, random draws taken from the default generator as eager would, one
// execute, output tensors wrapped around the result buffers. No lowering, no IR,
// no cache lookup.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <vector>

#include "aten/deferred_check.h"
#include "runtime/capture.h"

namespace ttpu::aten {

class CompiledCall {
 public:
  // Starts a capture on the device of `inputs` (the current device when there
  // are none). Call with nothing pending on that device, in fused mode.
  // `writes`: the graph may write its inputs (each replay then writes them
  // too, in place where the capture could donate them: runtime/capture.h).
  static void begin(const std::vector<at::Tensor>& inputs, bool writes = false);
  // Ends the capture (flushing the recorded ops) and returns the replay
  // recipe, or null when the call cannot be replayed (see runtime/capture.h; or
  // an output that is neither a program output, an input, nor empty).
  static std::shared_ptr<CompiledCall> end(const std::vector<at::Tensor>& inputs,
                                           const std::vector<std::optional<at::Tensor>>& outputs);
  // Drops a capture left open by an exception.
  static void abort(const std::vector<at::Tensor>& inputs);

  // The outputs of running the captured program on `inputs`, or nullopt when
  // the inputs differ from the captured ones. Raises c10::Error when the
  // program fails or an input's value could not be computed.
  std::optional<std::vector<std::optional<at::Tensor>>> replay(
      const std::vector<at::Tensor>& inputs) const;
  // Benchmark only: mean nanoseconds per PJRT execute of the captured program
  // on `inputs`' buffers, `n` executes enqueued back to back then awaited, no
  // other work (what replay() adds is the difference). A donated input is
  // copied once, then each execute donates the previous one's output to the
  // next (a decode loop's cache); `inputs` are not written.
  double raw_execute_ns(const std::vector<at::Tensor>& inputs, int n) const;

  // The captured program as torchtpu.spmd compiles it again over several
  // devices: its StableHLO text, each parameter (where its value comes from:
  // "input" i's storage, a "rng" draw, or a "constant", given as a 1-D tpu
  // tensor on the capture's device; its dtype and dims), each program
  // output's (dtype, dims), and each call output: ("program" k | "input" i |
  // "empty" | "none", index, dtype, sizes, strides, offset) and the program
  // outputs its deferred value checks read (spmd_defer_checks). Raises
  // c10::NotImplementedError when the call writes its inputs.
  struct Param {
    std::string source;
    size_t index;
    c10::ScalarType dtype;
    std::vector<int64_t> dims;
    std::optional<at::Tensor> constant;
  };
  struct CallOutput {
    std::string from;
    size_t index;
    c10::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset;
  };
  struct Description {
    std::string text;
    int device;
    std::vector<Param> params;
    std::vector<std::pair<c10::ScalarType, std::vector<int64_t>>> program_outputs;
    std::vector<CallOutput> outputs;
    std::vector<size_t> check_outputs;  // program outputs the checks read
  };
  Description describe() const;
  // Defers this call's value checks (aten/deferred_check.h) on `outputs`, one
  // flat tpu tensor per program output (an SPMD run's results on one device:
  // the checks' values are replicated), as replay() does with its own.
  void spmd_defer_checks(const std::vector<at::Tensor>& outputs) const;

 private:
  struct View {
    c10::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    int64_t storage_nbytes = 0;
    bool matches(const at::Tensor& t) const;
    static View of(const at::Tensor& t);
  };
  enum class From { kNone, kProgram, kInput, kEmpty };
  struct Output {
    From from = From::kNone;
    size_t index = 0;  // program output or input position
    View view;
  };

  // Deferred checks the call made (aten/deferred_check.h): the program output
  // holding each checked value, deferred again at every replay.
  struct Check {
    size_t output, ok_output;  // program outputs of the checked value and its ok flag
    View view, ok_view;
    CheckFn check;
  };

  at::Tensor program_output(const std::vector<std::shared_ptr<pjrt::Buffer>>& buffers,
                            std::vector<std::optional<c10::Storage>>& storages, size_t k,
                            const View& view) const;

  std::unique_ptr<runtime::Capture> capture_;
  std::vector<Check> checks_;
  std::vector<View> inputs_;
  std::vector<ir::DType> input_slot_dtypes_;
  std::vector<size_t> input_alias_;  // first input whose storage shares the buffer
  std::vector<Output> outputs_;
};

}  // namespace ttpu::aten
