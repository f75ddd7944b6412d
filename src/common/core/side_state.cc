#include "common/core/side_state.h"

namespace uniccl {

void releaseSideState(SideState* s, bool abort) {
  releaseSideStreams(&s->streams);
  releaseStaging(&s->inPlace, abort);
  releasePatScratch(&s->pat);
}

}  // namespace uniccl
