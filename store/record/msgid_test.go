package record

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRecordOffsetMessageID(t *testing.T) {
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	if got := OffsetMessageID(host, 0); got != "7F00000100002A9F0000000000000000" {
		t.Errorf("OffsetMessageID = %s", got)
	}
	if got := OffsetMessageID(netip.MustParseAddrPort("10.1.2.3:10911"), 0x1234ABCD); got != "0A01020300002A9F000000001234ABCD" {
		t.Errorf("OffsetMessageID = %s", got)
	}
	v6 := netip.MustParseAddrPort("[2001:db8::1]:10911")
	id := OffsetMessageID(v6, 1<<40)
	if want := "20010DB8000000000000000000000001" + "00002A9F" + "0000010000000000"; id != want {
		t.Errorf("IPv6 OffsetMessageID = %s, want %s", id, want)
	}
	for _, c := range []struct {
		host netip.AddrPort
		off  int64
	}{{host, 0}, {host, 1<<63 - 1}, {v6, 42}, {netip.MustParseAddrPort("255.255.255.255:65535"), -1}} {
		s := OffsetMessageID(c.host, c.off)
		for _, in := range []string{s, strings.ToLower(s)} {
			h, off, err := ParseOffsetMessageID(in)
			if err != nil || h != c.host || off != c.off {
				t.Errorf("ParseOffsetMessageID(%s) = %v, %d, %v; want %v, %d", in, h, off, err, c.host, c.off)
			}
		}
	}
	if got := string(AppendOffsetMessageID([]byte("x,"), host, 1)); got != "x,7F00000100002A9F0000000000000001" {
		t.Errorf("AppendOffsetMessageID = %s", got)
	}
	buf := make([]byte, 0, 64)
	if a := testing.AllocsPerRun(1000, func() { buf = AppendOffsetMessageID(buf[:0], v6, 99) }); a != 0 {
		t.Errorf("AppendOffsetMessageID allocates %.1f", a)
	}
	for _, bad := range []string{"", "7F00000100002A9F000000000000000", "7F00000100002A9F00000000000000000",
		"7G00000100002A9F0000000000000000", "7F00000100012A9F0000000000000000" /* port 0x12A9F */} {
		if _, _, err := ParseOffsetMessageID(bad); !errors.Is(err, ErrBadMessageID) {
			t.Errorf("ParseOffsetMessageID(%q) err = %v", bad, err)
		}
	}
}

func TestRecordUniqueID(t *testing.T) {
	loc := time.FixedZone("X", 3*3600)
	now := time.Date(2024, time.March, 5, 10, 20, 30, 456e6, loc)
	clock := now
	g := newUniqueIDGenerator(netip.MustParseAddr("10.0.0.1"), 0x12345, 0xCAFEBABE, func() time.Time { return clock })
	ms := now.Sub(time.Date(2024, time.March, 1, 0, 0, 0, 0, loc)).Milliseconds()
	want := "0A000001" + "2345" + "CAFEBABE" + strings.ToUpper(hex32(uint32(ms))) + "0000"
	if got := g.Next(); got != want {
		t.Fatalf("Next = %s, want %s", got, want)
	}
	ip, pid, gotMS, counter, err := ParseUniqueID(strings.ToLower(g.Next()))
	if err != nil || ip != netip.MustParseAddr("10.0.0.1") || pid != 0x2345 || gotMS != ms || counter != 1 {
		t.Errorf("ParseUniqueID = %v %x %d %d %v", ip, pid, gotMS, counter, err)
	}
	// Month roll-over resets the time part.
	clock = time.Date(2024, time.April, 1, 0, 0, 1, 0, loc)
	if _, _, gotMS, _, _ = ParseUniqueID(g.Next()); gotMS != 1000 {
		t.Errorf("after roll-over ms = %d, want 1000", gotMS)
	}
	// 31 days of ms exceed an int32: still decoded as unsigned.
	clock = time.Date(2024, time.May, 31, 23, 59, 59, 0, loc)
	if _, _, gotMS, _, _ = ParseUniqueID(g.Next()); gotMS != (31*86400-1)*1000 {
		t.Errorf("end of month ms = %d", gotMS)
	}
	// Counter wraps at 16 bits.
	g.counter.Store(0xFFFF)
	_, _, _, c1, _ := ParseUniqueID(g.Next())
	_, _, _, c2, _ := ParseUniqueID(g.Next())
	if c1 != 0xFFFF || c2 != 0 {
		t.Errorf("counter wrap: %d, %d", c1, c2)
	}

	g6 := newUniqueIDGenerator(netip.MustParseAddr("2001:db8::5"), 7, 1, func() time.Time { return clock })
	id := g6.Next()
	if len(id) != UniqueIDLenV6 || !strings.HasPrefix(id, "20010DB8000000000000000000000005"+"0007"+"00000001") {
		t.Errorf("IPv6 unique id %s", id)
	}
	if ip, pid, _, _, err := ParseUniqueID(id); err != nil || ip != netip.MustParseAddr("2001:db8::5") || pid != 7 {
		t.Errorf("ParseUniqueID(v6) = %v %d %v", ip, pid, err)
	}
	for _, bad := range []string{"", "XYZ", strings.Repeat("0", 31), strings.Repeat("g", 32)} {
		if _, _, _, _, err := ParseUniqueID(bad); !errors.Is(err, ErrBadMessageID) {
			t.Errorf("ParseUniqueID(%q) err = %v", bad, err)
		}
	}
	mapped := NewUniqueIDGenerator(netip.MustParseAddr("::ffff:1.2.3.4"), 1).Next()
	if len(mapped) != UniqueIDLenV4 || !strings.HasPrefix(mapped, "01020304") {
		t.Errorf("IPv4-mapped generator id %s", mapped)
	}
	if id := NewUniqueIDGenerator(netip.Addr{}, 1).Next(); len(id) != UniqueIDLenV4 {
		t.Errorf("invalid-ip generator id %s", id)
	}
}

func hex32(v uint32) string {
	var b [4]byte
	be.PutUint32(b[:], v)
	return string(appendHex(nil, b[:]))
}

func TestRecordUniqueIDConcurrent(t *testing.T) {
	g := NewUniqueIDGenerator(netip.MustParseAddr("192.168.0.1"), 4242)
	const workers, per = 8, 2000
	ids := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				ids[w] = append(ids[w], g.Next())
			}
		}()
	}
	wg.Wait()
	seen := make(map[string]bool, workers*per)
	for _, list := range ids {
		for _, id := range list {
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
		}
	}
	buf := make([]byte, 0, 64)
	if a := testing.AllocsPerRun(1000, func() { buf = g.AppendNext(buf[:0]) }); a != 0 {
		t.Errorf("AppendNext allocates %.1f", a)
	}
}
