package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/obs"
	"github.com/smartgo/smartgo/internal/testutil"
)

// A key index file damaged while the broker was stopped is counted in
// smartgo_store_index_files_damaged_total and, once rebuilt from the
// commitlog, in smartgo_store_index_files_rebuilt_total.
func TestBrokerIndexDamageMetrics(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	c := newTestClient(t, b.Addr())
	for i := range 50 {
		c.mustSend("Keyed", 0, fmt.Sprint("body", i), fmt.Sprintf("KEYS\x01k%d\x02", i))
	}
	testutil.WaitFor(t, 10*time.Second, "indexed", func() bool { return b.Store().IndexedPhysicalOffset() == b.Store().MaxPhysicalOffset() })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "index", "*"))
	if len(files) != 1 {
		t.Fatalf("index files %v", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	clear(raw[40 : 40+1000*4]) // the slot table
	if err := os.WriteFile(files[0], raw, 0o644); err != nil {
		t.Fatal(err)
	}

	b2 := testBroker(t, dir, nil)
	reg := obs.NewRegistry()
	reg.MustRegister(b2.Collectors()...)
	ms, err := obs.Serve("127.0.0.1:0", reg, &obs.Health{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	testutil.WaitFor(t, 10*time.Second, "damaged and rebuilt counted", func() bool {
		page := scrapeMetrics(t, ms.Addr())
		return sample(page, "smartgo_store_index_files_damaged_total") == 1 && sample(page, "smartgo_store_index_files_rebuilt_total") == 1
	})
	r, err := b2.Store().QueryByKey("Keyed", "k7", 4, 0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if r.MessageCount() != 1 {
		t.Fatalf("k7 found %d times after the rebuild", r.MessageCount())
	}
}
