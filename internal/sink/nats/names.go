package nats

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/tidemark/tidemark/internal/change"
	"github.com/tidemark/tidemark/internal/config"
)

// The headers each message carries (docs/destinations.md, "NATS
// JetStream"). A change's position is its transaction's end and its index
// the message's number within that transaction; a backfill row's chunk is
// the number of rows the backfill sent before the chunk, and its row the
// row's number within the chunk.
const (
	hdrPosition = "Tidemark-Position"
	hdrIndex    = "Tidemark-Index"
	hdrBackfill = "Tidemark-Backfill"
	hdrChunk    = "Tidemark-Chunk"
	hdrRow      = "Tidemark-Row"
	hdrMark     = "Tidemark-Mark"
	hdrKey      = "Tidemark-Key"
)

// checkpointBucket is the key-value bucket holding every stream's
// checkpoint, under "<JetStream stream>.<stream>".
const checkpointBucket = "tidemark_checkpoints"

// names are where one stream's events go.
type names struct {
	stream string // the JetStream stream
	prefix string // subjects are prefix.<schema>.<table>
	key    string // the checkpoint's key in the bucket
}

func namesOf(d config.Destination, stream string) names {
	n := names{stream: d.NATSStream, prefix: d.SubjectPrefix}
	if n.stream == "" {
		n.stream = "tidemark_" + stream
	}
	if n.prefix == "" {
		n.prefix = "tidemark." + stream
	}
	n.key = n.stream + "." + stream
	return n
}

// subject is a table's subject: its schema and name each one token.
func (n names) subject(id change.TableID) string {
	return n.prefix + "." + token(id.Schema) + "." + token(id.Name)
}

// token escapes a name into one subject token: letters, digits, '_' and
// '-' stay, every other byte is %XX, so no name can add a token, be a
// wildcard or collide with another.
func token(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// msgID is a message's Nats-Msg-Id: a hash of what identifies its event
// (the table's subject, the event's kind and key, and its position or
// backfill chunk), the same when a batch is sent again, so the server's
// duplicate window drops the replay.
func msgID(subject, kind string, key []byte, nums ...uint64) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(subject), []byte(kind), key} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	for _, v := range nums {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
