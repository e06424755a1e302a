package sink

import (
	"context"
	"errors"
)

// ErrFenced means a newer owner of the stream fenced this one off: another
// node runs it now (docs/cluster.md). Nothing of the batch was committed.
var ErrFenced = errors.New("fenced: a newer owner of this stream has taken it over; nothing was written")

// ErrCannotFence means a destination of a Fencer type cannot refuse a
// former owner's writes as it is set up (a NATS stream shared with other
// subjects): a stream pinned to one node runs without the fence, any other
// fails with the reason.
var ErrCannotFence = errors.New("this destination cannot refuse a former owner's writes")

// Fencer is a destination that refuses the commits of a stream's former
// owner, which is what lets any node of a cluster run the stream.
type Fencer interface {
	// Fence records epoch as the stream's owner's, waiting for a commit of
	// an older owner in progress, and makes every later Apply of this sink
	// check, in its transaction, that the epoch is still the stream's. It
	// fails with ErrFenced when a newer epoch is recorded already.
	Fence(ctx context.Context, stream string, epoch int64) error
}
