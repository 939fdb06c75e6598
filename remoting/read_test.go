package remoting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// chunkReader returns at most the next size byte of r per Read, cycling
// through sizes, like a socket delivering a stream in arbitrary pieces.
type chunkReader struct {
	b     []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)]) + 1
		r.i++
	}
	n = min(n, len(p), len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// readFrames splits stream into frames with a readBuf, as the read loops
// do. Each frame holds a reference to its chunk, like an unrecycled
// command, unless recycle is set: then it is copied out and its reference
// dropped at once.
func readFrames(stream, sizes []byte, max int, recycle bool) ([][]byte, error) {
	var rb readBuf
	r := &chunkReader{b: stream, sizes: sizes}
	var out [][]byte
	for {
		for {
			f, err := rb.next(max)
			if err != nil {
				return out, err
			}
			if f == nil {
				break
			}
			if recycle {
				out = append(out, bytes.Clone(f))
				continue
			}
			rb.k.refs.Add(1)
			out = append(out, f)
		}
		if err := rb.fill(r, max); err != nil {
			return out, err
		}
	}
}

// The read buffer hands out exactly the frames of the stream, whatever
// pieces it arrives in, frames larger than a chunk and frames straddling
// chunks included; bodies of earlier frames are never overwritten.
func TestRemotingReadBufFrames(t *testing.T) {
	var stream []byte
	var want [][]byte
	for i, n := range []int{4, 100, readChunk - 10, 5, readChunk + 7, 3 * readChunk, 0, 4096, 4096, 4096} {
		body := bytes.Repeat([]byte{byte(i + 1)}, n)
		frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
		frame = binary.BigEndian.AppendUint32(frame, 0)
		frame = append(frame, body...)
		stream = append(stream, frame...)
		want = append(want, frame[4:])
	}
	for _, recycle := range []bool{false, true} {
		for _, sizes := range [][]byte{nil, {255}, {7, 200, 3}, {255, 255, 255, 255, 40}} {
			got, err := readFrames(stream, sizes, 0, recycle)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("recycle %v sizes %v: %v", recycle, sizes, err)
			}
			if len(got) != len(want) {
				t.Fatalf("recycle %v sizes %v: %d frames, want %d", recycle, sizes, len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("recycle %v sizes %v: frame %d differs (len %d, want %d)", recycle, sizes, i, len(got[i]), len(want[i]))
				}
			}
		}
	}
	// A length word over the limit fails before anything is allocated.
	big := binary.BigEndian.AppendUint32(nil, 1<<30)
	if _, err := readFrames(big, nil, 1<<20, false); !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
}

// FuzzRemotingReadBuf checks that the read buffer never panics and splits
// any stream, arriving in any pieces, into the frames of a plain parse of
// the whole stream, failing on the same bad length word; frames are held
// (unrecycled) or recycled at once depending on the first piece size.
func FuzzRemotingReadBuf(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0}, []byte{0})
	f.Add([]byte{0, 0, 0, 6, 0, 0, 0, 0, 'h', 'i', 0, 0, 0, 3}, []byte{2, 0, 9})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, []byte(nil))
	f.Add([]byte{0, 0, 0, 6, 0, 0, 0, 0, 'h', 'i', 0, 0, 0, 4, 0, 0, 0, 0}, []byte{1, 3}) // odd first size: recycled frames
	f.Fuzz(func(t *testing.T, stream, sizes []byte) {
		const max = 1 << 16
		got, gotErr := readFrames(stream, sizes, max, len(sizes) > 0 && sizes[0]&1 == 1)
		var want [][]byte
		var wantErr error
		for p := stream; len(p) >= 4; {
			n, err := protocol.FrameLength(binary.BigEndian.Uint32(p), max)
			if err != nil {
				wantErr = err
				break
			}
			if len(p)-4 < n {
				break
			}
			want = append(want, p[4:4+n])
			p = p[4+n:]
		}
		if len(got) != len(want) {
			t.Fatalf("%d frames, want %d (%v)", len(got), len(want), gotErr)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
		switch {
		case wantErr == nil && !errors.Is(gotErr, io.EOF):
			t.Fatalf("want end of stream, got %v", gotErr)
		case wantErr != nil && gotErr.Error() != wantErr.Error():
			t.Fatalf("error %v, want %v", gotErr, wantErr)
		}
	})
}
