package rocketmq

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Messages with keys sent by rocketmq-client-go; the broker stopped; the
// slot table of one of its key index files zeroed (what a bad disk or a
// torn write leaves); the broker started again on the same data: every
// message is found by key with QUERY_MESSAGE (as mqadmin queryMsgByKey
// asks) once the damaged file is rebuilt. It used to answer nothing for
// the keys of that file.
func TestInteropQueryByKeyAfterIndexDamage(t *testing.T) {
	dir := t.TempDir()
	small := []string{"-set", "store.index_slots=1024", "-set", "store.index_entries=400"}
	s, stop := runStandaloneAt(t, dir, small...)
	const topic = "interop-index-damage"
	createTopic(t, s.broker, topic, 2)
	p := newProducer(t, s, "index-damage")
	const n = 300 // 2 keys each (KEYS, UNIQ_KEY): two full index files and part of a third
	for i := range n {
		m := primitive.NewMessage(topic, []byte("body-"+strconv.Itoa(i)))
		m.WithKeys([]string{"key-" + strconv.Itoa(i)})
		if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %d: %v %v", i, res, err)
		}
	}
	_ = p.Shutdown()
	stop()

	files, err := filepath.Glob(filepath.Join(dir, "data", "store", "index", "?????????????????"))
	if err != nil || len(files) < 2 {
		t.Fatalf("index files %v, %v", files, err)
	}
	sort.Strings(files)
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	clear(b[40 : 40+1024*4]) // every slot of the oldest file
	if err := os.WriteFile(files[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	s2, _ := runStandaloneAt(t, dir, small...)
	query := func(key string) []byte {
		resp := testnet.JavaInvoke(t, s2.broker, protocol.QueryMessage, map[string]string{"topic": topic, "key": key,
			"maxNum": "32", "beginTimestamp": "0", "endTimestamp": strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)}, nil)
		if resp.Code != protocol.Success {
			return nil
		}
		return resp.Body
	}
	testutil.WaitFor(t, 30*time.Second, "every message found by its key", func() bool {
		for i := range n {
			if body := query("key-" + strconv.Itoa(i)); !bytes.Contains(body, []byte("body-"+strconv.Itoa(i))) {
				return false
			}
		}
		return true
	})
	if !fileContains(s2.log.Name(), "rebuilt") {
		t.Error("the damaged index file was not reported")
	}
}
