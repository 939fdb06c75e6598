package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// Producer-side compression defaults, as RocketMQ's clients use them: bodies
// larger than CompressThreshold bytes are compressed with zlib level
// CompressLevel.
const (
	CompressThreshold = 4096
	CompressLevel     = 5
)

// DefaultDecompressLimit bounds DecompressBody's output when the caller
// passes maxSize <= 0.
const DefaultDecompressLimit = 64 << 20

// Compression selects a body compression algorithm for CompressBody.
type Compression uint8

// Compression algorithms.
const (
	CompressionNone     Compression = iota // body left as is
	CompressionAlgoZlib                    // zlib (RFC 1950), RocketMQ's default; sysFlag FlagCompressed|CompressionZlib
	CompressionAlgoZstd                    // Zstandard; sysFlag FlagCompressed|CompressionZstd
)

// String returns the algorithm name.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionAlgoZlib:
		return "zlib"
	case CompressionAlgoZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// appendWriter is an io.Writer appending to a byte slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// zlibWriter is a pooled zlib writer with its output sink.
type zlibWriter struct {
	zw  *zlib.Writer
	out appendWriter
}

// zlibWriters holds one pool per level (-2 .. 9, i.e. HuffmanOnly .. Best).
var zlibWriters [12]sync.Pool

func getZlibWriter(level int) (*zlibWriter, error) {
	if level < zlib.HuffmanOnly || level > zlib.BestCompression {
		return nil, fmt.Errorf("%w: zlib level %d (want -2..9)", ErrUnsupportedCompression, level)
	}
	if w, ok := zlibWriters[level+2].Get().(*zlibWriter); ok {
		return w, nil
	}
	w := new(zlibWriter)
	zw, err := zlib.NewWriterLevel(&w.out, level)
	if err != nil {
		return nil, fmt.Errorf("record: zlib writer: %w", err)
	}
	w.zw = zw
	return w, nil
}

// zlibReader is a pooled zlib reader with its input.
type zlibReader struct {
	zr  io.ReadCloser // also a zlib.Resetter
	src bytes.Reader
}

var zlibReaders sync.Pool

// zstd coder state is shared: EncodeAll and DecodeAll are safe for
// concurrent use and keep their block state internally.
var (
	zstdEncOnce [5]sync.Once
	zstdEnc     [5]*zstd.Encoder
	zstdEncErr  [5]error

	zstdDecOnce sync.Once
	zstdDec     *zstd.Decoder
	zstdDecErr  error
)

func zstdEncoder(level int) (*zstd.Encoder, error) {
	l := zstd.SpeedDefault
	if level > 0 {
		l = zstd.EncoderLevelFromZstd(level)
	}
	i := int(l)
	zstdEncOnce[i].Do(func() {
		zstdEnc[i], zstdEncErr[i] = zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithLowerEncoderMem(true))
	})
	return zstdEnc[i], zstdEncErr[i]
}

func zstdDecoder() (*zstd.Decoder, error) {
	zstdDecOnce.Do(func() {
		zstdDec, zstdDecErr = zstd.NewReader(nil,
			zstd.WithDecodeAllCapLimit(true), // DecodeAll stops near cap(dst): the size bound
			zstd.WithDecoderLowmem(true),
		)
	})
	return zstdDec, zstdDecErr
}

// CompressBody compresses body with algo and returns the compressed body
// and the sysFlag bits to OR into the message (zlib:
// FlagCompressed|CompressionZlib; zstd: FlagCompressed|CompressionZstd).
// The result is built in dst's storage (dst[:0]) when it is large enough.
// level is the zlib level (-1 default, 0..9) or the zstd level (<= 0
// default, 1..22 mapped onto the encoder's speed classes). CompressionNone
// returns body itself and no flags. Coder state is pooled, so repeated calls
// do not allocate it again.
func CompressBody(dst []byte, body []byte, algo Compression, level int) ([]byte, int32, error) {
	switch algo {
	case CompressionNone:
		return body, 0, nil
	case CompressionAlgoZlib:
		w, err := getZlibWriter(level)
		if err != nil {
			return nil, 0, err
		}
		w.out.b = dst[:0]
		w.zw.Reset(&w.out)
		_, err = w.zw.Write(body)
		if err == nil {
			err = w.zw.Close()
		}
		out := w.out.b
		w.out.b = nil
		zlibWriters[level+2].Put(w)
		if err != nil {
			return nil, 0, fmt.Errorf("record: zlib compress: %w", err)
		}
		return out, FlagCompressed | CompressionZlib, nil
	case CompressionAlgoZstd:
		enc, err := zstdEncoder(level)
		if err != nil {
			return nil, 0, fmt.Errorf("record: zstd encoder: %w", err)
		}
		return enc.EncodeAll(body, dst[:0]), FlagCompressed | CompressionZstd, nil
	}
	return nil, 0, fmt.Errorf("%w: %v", ErrUnsupportedCompression, algo)
}

// DecompressBody decompresses a body according to sysFlag: without
// FlagCompressed the body itself is returned; with it, CompressionMask 0 or
// CompressionZlib means zlib, CompressionZstd zstd, and CompressionLZ4 (or
// the unassigned values) ErrUnsupportedCompression. The output is built in
// dst's storage (dst[:0]) when it is large enough. More than maxSize output
// bytes (DefaultDecompressLimit if maxSize <= 0) fail with
// ErrDecompressedTooLarge, after decoding at most maxSize+1 bytes (plus one
// zstd block). A zstd frame that does not declare its content size is also
// rejected that way if its window exceeds max(maxSize, 1 MiB), which keeps
// the decoder's memory in proportion to the bound.
func DecompressBody(dst []byte, body []byte, sysFlag int32, maxSize int) ([]byte, error) {
	if sysFlag&FlagCompressed == 0 {
		return body, nil
	}
	if maxSize <= 0 {
		maxSize = DefaultDecompressLimit
	}
	switch t := sysFlag & CompressionMask; t {
	case 0, CompressionZlib:
		return inflateZlib(dst[:0], body, maxSize)
	case CompressionZstd:
		return decodeZstd(dst[:0], body, maxSize)
	default:
		return nil, fmt.Errorf("%w: compression type 0x%X", ErrUnsupportedCompression, t)
	}
}

func inflateZlib(dst, body []byte, maxSize int) ([]byte, error) {
	r, _ := zlibReaders.Get().(*zlibReader)
	if r == nil {
		r = new(zlibReader)
	}
	defer func() {
		r.src.Reset(nil)
		zlibReaders.Put(r)
	}()
	r.src.Reset(body)
	var err error
	if r.zr == nil {
		r.zr, err = zlib.NewReader(&r.src)
	} else {
		err = r.zr.(zlib.Resetter).Reset(&r.src, nil)
	}
	if err != nil {
		r.zr = nil
		return nil, fmt.Errorf("record: zlib decompress: %w", err)
	}
	out, err := readBounded(dst, r.zr, 4*len(body)+64, maxSize)
	if err != nil && !errors.Is(err, ErrDecompressedTooLarge) {
		err = fmt.Errorf("record: zlib decompress: %w", err)
	}
	return out, err
}

// readBounded appends everything rd produces to dst (starting with a
// capacity of about hint) and fails with ErrDecompressedTooLarge as soon as
// more than maxSize bytes arrive.
func readBounded(dst []byte, rd io.Reader, hint, maxSize int) ([]byte, error) {
	if cap(dst) == 0 {
		dst = make([]byte, 0, min(hint, maxSize+1))
	}
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)] // grow
		}
		n, err := rd.Read(dst[len(dst):min(cap(dst), maxSize+1)])
		dst = dst[:len(dst)+n]
		if len(dst) > maxSize {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrDecompressedTooLarge, maxSize)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// zstdStream is a pooled synchronous stream decoder with its input, for
// frames that do not declare their size.
type zstdStream struct {
	dec *zstd.Decoder
	src bytes.Reader
}

var zstdStreams sync.Pool

// zstdMinWindowBound is the smallest window a frame without a declared
// content size may use, whatever the output bound.
const zstdMinWindowBound = 1 << 20

func decodeZstd(dst, body []byte, maxSize int) ([]byte, error) {
	// Common case: one frame that declares its content size (zstd's
	// one-shot encoders, ours and Java's, write it). Decode it in one go
	// into exactly that much room; the cap limit stops anything more.
	var h zstd.Header
	if h.Decode(body) == nil && h.HasFCS {
		if h.FrameContentSize > uint64(maxSize) {
			return nil, fmt.Errorf("%w: frame declares %d bytes, max %d", ErrDecompressedTooLarge, h.FrameContentSize, maxSize)
		}
		dec, err := zstdDecoder()
		if err != nil {
			return nil, fmt.Errorf("record: zstd decoder: %w", err)
		}
		n := int(h.FrameContentSize)
		if cap(dst) < n {
			dst = make([]byte, 0, n)
		}
		out, err := dec.DecodeAll(body, dst[:0:n])
		if err == nil {
			return out, nil
		}
		if h.FrameContentSize > 0 && len(out) < n {
			return nil, fmt.Errorf("record: zstd decompress: %w", err)
		}
		// More output than the first frame declared (concatenated frames):
		// take the bounded streaming path below.
	}
	s, _ := zstdStreams.Get().(*zstdStream)
	if s == nil {
		dec, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // synchronous: no goroutines
			zstd.WithDecoderLowmem(true),
		)
		if err != nil {
			return nil, fmt.Errorf("record: zstd decoder: %w", err)
		}
		s = &zstdStream{dec: dec}
	}
	defer func() {
		s.dec.Reset(nil) // drop the reference to body
		s.src.Reset(nil)
		zstdStreams.Put(s)
	}()
	s.src.Reset(body)
	// The window (history) is allocated up front; keep it in proportion to
	// the output bound.
	window := uint64(max(maxSize, zstdMinWindowBound))
	if err := s.dec.ResetWithOptions(&s.src, zstd.WithDecoderMaxWindow(window)); err != nil {
		return nil, fmt.Errorf("record: zstd decompress: %w", err)
	}
	out, err := readBounded(dst[:0], s.dec, 4*len(body)+64, maxSize)
	switch {
	case err == nil, errors.Is(err, ErrDecompressedTooLarge):
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		err = fmt.Errorf("%w: frame window above %d bytes: %w", ErrDecompressedTooLarge, window, err)
	default:
		err = fmt.Errorf("record: zstd decompress: %w", err)
	}
	return out, err
}
