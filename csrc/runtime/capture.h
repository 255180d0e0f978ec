// Capture of one fused graph for replay (torch.compile, issue 5): a graph call
// recorded once in fused mode becomes a program plus a recipe for its arguments,
// so later calls run it as ONE PJRT execute with no per-op work.
//
// How a capture is taken (Fusion::begin_capture / end_capture): the caller names
// the input slots, runs the graph's ops in fused mode, then ends the capture,
// which flushes the pending graph. Each argument buffer of the flushed program is
// classified by where it came from:
//   - kInput: the buffer of input slot `index` (read afresh at each replay);
//   - kRng: the {seed, offset} state of random draw `index` (drawn afresh from
//     the device's default generator at each replay, in the captured order);
//   - kConstant: anything else (Python scalars and view offsets of the graph,
//     constants it holds), which depend only on the graph's structure.
// The capture is refused (end_capture returns null) when the graph could not be
// run as one program: a flush happened in the middle (an op without a lowering,
// a host read), an input was written when the caller did not allow it, an input
// had no buffer, or a random op used a generator of its own.
//
// Written inputs (allowed for torch.compile graphs, whose AOTAutograd keeps input
// mutations as copy_ nodes, e.g. a static KV cache's index_copy_): the input's
// new value is a program output, and each replay gives the input's slot that
// output's buffer. Where the capture's own run donated the input's buffer to its
// output (Fusion::donate: nothing else held it), the program aliases the two
// (`donated_to`), so XLA updates the input in place and every replay donates
// the input's buffer again (a copy of it first, if something else holds it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pjrt/pjrt.h"
#include "runtime/runtime.h"

namespace ttpu::runtime {

struct Capture {
  enum class Source { kInput, kRng, kConstant };
  struct Arg {
    Source source;
    size_t index = 0;                        // input slot or draw number
    std::shared_ptr<pjrt::Buffer> constant;  // kConstant only
    int32_t donated_to = -1;                 // kInput: the program output it is donated to
  };
  std::shared_ptr<pjrt::Executable> executable;
  // The program's graph, kept for torchtpu.spmd, which compiles it again
  // over several devices (aten/compiled_call.h, describe()).
  std::shared_ptr<const ir::Graph> graph;
  std::string name;  // names the program in errors
  int device = 0;
  std::vector<Arg> args;
  size_t rng_draws = 0;  // draws taken from the default generator per call
  // The program's outputs: the slots that received them at the capture.
  std::vector<Slot*> outputs;
  std::vector<ir::DType> output_dtypes;
  // Written inputs: (input slot, program output holding its new value).
  std::vector<std::pair<size_t, size_t>> written;
};

// What a Fusion tracks while a capture is being taken.
struct CaptureState {
  bool active = false;
  bool broken = false;  // a reason to refuse was met
  bool ending = false;  // end_capture's own flush
  bool writes = false;  // inputs may be written (see above)
  std::vector<Slot*> inputs;
  std::vector<const pjrt::Buffer*> input_buffers;
  std::vector<const pjrt::Buffer*> rng_buffers;  // one per draw, in order
  std::unique_ptr<Capture> result;
};

// Keeps `buffers` (donated to the program that produced `output`, taken out
// of their pjrt::Buffer owners) until `output` is ready, then drops them at a
// later flush: destroying a donated buffer earlier would wait for the program.
void keep_donated_until_run(std::vector<std::unique_ptr<pjrt::Buffer>> buffers,
                            const pjrt::Buffer& output);

}  // namespace ttpu::runtime
