package record

import (
	"bytes"
	stdzlib "compress/zlib"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func compressibleBody(n int) []byte {
	r := rand.New(rand.NewPCG(7, 8))
	words := []string{"order", "paid", "shipped", "user", "42", "sku-", "{", "}", ":", ","}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

func TestRecordCompressRoundTrip(t *testing.T) {
	body := compressibleBody(64 << 10)
	for _, c := range []struct {
		algo  Compression
		level int
		flags int32
	}{
		{CompressionAlgoZlib, CompressLevel, FlagCompressed | CompressionZlib},
		{CompressionAlgoZlib, -1, FlagCompressed | CompressionZlib},
		{CompressionAlgoZlib, 9, FlagCompressed | CompressionZlib},
		{CompressionAlgoZstd, 0, FlagCompressed | CompressionZstd},
		{CompressionAlgoZstd, 3, FlagCompressed | CompressionZstd},
		{CompressionAlgoZstd, 19, FlagCompressed | CompressionZstd},
	} {
		comp, flags, err := CompressBody(nil, body, c.algo, c.level)
		if err != nil {
			t.Fatalf("%v level %d: %v", c.algo, c.level, err)
		}
		if flags != c.flags || len(comp) >= len(body)/2 {
			t.Errorf("%v level %d: flags %#x, %d -> %d bytes", c.algo, c.level, flags, len(body), len(comp))
		}
		out, err := DecompressBody(nil, comp, flags|FlagMultiTags, len(body))
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("%v level %d: round trip failed: %v", c.algo, c.level, err)
		}
		// An exact bound one byte short fails.
		if _, err := DecompressBody(nil, comp, flags, len(body)-1); !errors.Is(err, ErrDecompressedTooLarge) {
			t.Errorf("%v level %d: bound len-1: %v", c.algo, c.level, err)
		}
	}
	// Older clients set only COMPRESSED: zlib. Interoperate with an
	// independent zlib implementation (the standard library).
	var std bytes.Buffer
	zw, _ := stdzlib.NewWriterLevel(&std, CompressLevel)
	zw.Write(body)
	zw.Close()
	out, err := DecompressBody(make([]byte, 10), std.Bytes(), FlagCompressed, 0)
	if err != nil || !bytes.Equal(out, body) {
		t.Fatalf("stdlib zlib stream: %v", err)
	}
	comp, _, _ := CompressBody(nil, body, CompressionAlgoZlib, CompressLevel)
	zr, err := stdzlib.NewReader(bytes.NewReader(comp))
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := back.ReadFrom(zr); err != nil || !bytes.Equal(back.Bytes(), body) {
		t.Fatalf("stdlib cannot read our zlib: %v", err)
	}
	// Empty and tiny bodies.
	for _, algo := range []Compression{CompressionAlgoZlib, CompressionAlgoZstd} {
		for _, b := range [][]byte{nil, []byte("x")} {
			comp, flags, err := CompressBody(nil, b, algo, 0)
			if err != nil {
				t.Fatal(err)
			}
			out, err := DecompressBody(nil, comp, flags, 10)
			if err != nil || !bytes.Equal(out, b) {
				t.Errorf("%v %q: %q, %v", algo, b, out, err)
			}
		}
	}
}

func TestRecordCompressOptions(t *testing.T) {
	body := []byte("abc")
	if out, flags, err := CompressBody(nil, body, CompressionNone, 0); err != nil || flags != 0 || &out[0] != &body[0] {
		t.Errorf("CompressionNone: %v %#x", err, flags)
	}
	if _, _, err := CompressBody(nil, body, Compression(9), 0); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("unknown algo: %v", err)
	}
	if _, _, err := CompressBody(nil, body, CompressionAlgoZlib, 10); !errors.Is(err, ErrUnsupportedCompression) {
		t.Errorf("zlib level 10 accepted")
	}
	if out, err := DecompressBody(nil, body, FlagMultiTags, 1); err != nil || &out[0] != &body[0] {
		t.Errorf("uncompressed body: %v", err)
	}
	for _, flags := range []int32{FlagCompressed | CompressionLZ4, FlagCompressed | 0x400, FlagCompressed | 0x700} {
		if _, err := DecompressBody(nil, body, flags, 100); !errors.Is(err, ErrUnsupportedCompression) {
			t.Errorf("flags %#x: %v", flags, err)
		}
	}
	for _, flags := range []int32{FlagCompressed, FlagCompressed | CompressionZstd} {
		for _, junk := range [][]byte{[]byte("not compressed"), {0x78, 0x9C, 1, 2, 3}, {0x28, 0xB5, 0x2F, 0xFD, 0xFF}} {
			if _, err := DecompressBody(nil, junk, flags, 100); err == nil {
				t.Errorf("flags %#x: junk %q accepted", flags, junk)
			}
		}
	}
	// A truncated zlib stream fails (checksum never reached).
	comp, _, _ := CompressBody(nil, compressibleBody(10000), CompressionAlgoZlib, 5)
	if _, err := DecompressBody(nil, comp[:len(comp)-4], FlagCompressed, 0); err == nil {
		t.Errorf("truncated zlib accepted")
	}
}

func TestRecordDecompressBound(t *testing.T) {
	bomb := make([]byte, 8<<20) // 8 MiB of zeros
	const limit = 1 << 20
	zl, fl, _ := CompressBody(nil, bomb, CompressionAlgoZlib, 9)
	zs, fs, _ := CompressBody(nil, bomb, CompressionAlgoZstd, 3)
	// A zstd stream without a declared content size (streaming encoder).
	var stream bytes.Buffer
	enc, _ := zstd.NewWriter(&stream)
	enc.Write(bomb)
	enc.Close()
	var h zstd.Header
	if err := h.Decode(stream.Bytes()); err != nil || h.HasFCS {
		t.Fatalf("streaming frame header: %+v %v", h, err)
	}
	for _, c := range []struct {
		name  string
		body  []byte
		flags int32
	}{{"zlib", zl, fl}, {"zstd", zs, fs}, {"zstd without content size", stream.Bytes(), FlagCompressed | CompressionZstd}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := DecompressBody(nil, c.body, c.flags, limit)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrDecompressedTooLarge) {
			t.Errorf("%s (%d bytes compressed): err = %v", c.name, len(c.body), err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*limit {
			t.Errorf("%s: allocated %d bytes to reject a bomb with a %d-byte bound", c.name, alloc, limit)
		}
		if out, err := DecompressBody(nil, c.body, c.flags, len(bomb)); err != nil || len(out) != len(bomb) {
			t.Errorf("%s: exact bound: %d bytes, %v", c.name, len(out), err)
		}
	}
}

func TestRecordCompressPooled(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	body := compressibleBody(16 << 10)
	dst := make([]byte, 0, 64<<10)
	out := make([]byte, 0, 64<<10)
	for _, algo := range []Compression{CompressionAlgoZlib, CompressionAlgoZstd} {
		run := func() {
			comp, flags, err := CompressBody(dst, body, algo, CompressLevel)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecompressBody(out, comp, flags, 0); err != nil {
				t.Fatal(err)
			}
		}
		run() // warm the pools / shared coders
		var before, after runtime.MemStats
		const rounds = 200
		runtime.ReadMemStats(&before)
		for range rounds {
			run()
		}
		runtime.ReadMemStats(&after)
		// Fresh coder state is hundreds of KiB; pooled calls must stay far below.
		if per := (after.TotalAlloc - before.TotalAlloc) / rounds; per > 16<<10 {
			t.Errorf("%v: %d bytes allocated per compress+decompress, coder state is not reused", algo, per)
		}
	}
	if !strings.Contains(CompressionAlgoZstd.String()+CompressionAlgoZlib.String()+CompressionNone.String(), "zstdzlibnone") {
		t.Errorf("Compression.String")
	}
}

func TestRecordDecompressZstdFrames(t *testing.T) {
	body := compressibleBody(200 << 10)
	// Stream frame with a small window and no content size.
	var stream bytes.Buffer
	enc, _ := zstd.NewWriter(&stream, zstd.WithWindowSize(64<<10))
	enc.Write(body)
	enc.Close()
	flags := FlagCompressed | CompressionZstd
	if out, err := DecompressBody(nil, stream.Bytes(), flags, 1<<20); err != nil || !bytes.Equal(out, body) {
		t.Errorf("stream frame: %v", err)
	}
	if _, err := DecompressBody(nil, stream.Bytes(), flags, 100<<10); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Errorf("stream frame over bound: %v", err)
	}
	// Two one-shot frames back to back: the first declares only its own size.
	a, _, _ := CompressBody(nil, body[:1000], CompressionAlgoZstd, 3)
	b, _, _ := CompressBody(nil, body[1000:5000], CompressionAlgoZstd, 3)
	both := append(bytes.Clone(a), b...)
	if out, err := DecompressBody(nil, both, flags, 1<<20); err != nil || !bytes.Equal(out, body[:5000]) {
		t.Errorf("concatenated frames: %d bytes, %v", len(out), err)
	}
	if _, err := DecompressBody(nil, both, flags, 4999); !errors.Is(err, ErrDecompressedTooLarge) {
		t.Errorf("concatenated frames over bound: %v", err)
	}
	// A corrupted payload is an error, not a panic or a silent short body.
	bad := bytes.Clone(b)
	bad[len(bad)/2] ^= 0xFF
	if out, err := DecompressBody(nil, bad, flags, 1<<20); err == nil && bytes.Equal(out, body[1000:5000]) {
		t.Errorf("corrupted frame decoded to the original")
	} else if err == nil {
		t.Errorf("corrupted frame accepted")
	}
}

func TestRecordCompressConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				body := compressibleBody(1000 + 997*(w*40+i)%20000)
				algo := []Compression{CompressionAlgoZlib, CompressionAlgoZstd}[i%2]
				comp, flags, err := CompressBody(nil, body, algo, CompressLevel)
				if err != nil {
					t.Error(err)
					return
				}
				out, err := DecompressBody(nil, comp, flags, len(body))
				if err != nil || !bytes.Equal(out, body) {
					t.Errorf("worker %d round %d (%v): %v", w, i, algo, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
