package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestClusterHASlaveFullCopyDueUnderOffsetNotices: the master's offset
// notices (scope=offsets, one per offsetNoticeInterval while consumers
// commit) make the slave copy only the offsets, and must not put off its
// full copy every SlaveSyncInterval, the one that catches up a topic or
// group change whose notice the slave missed. The slave's topic table is
// made to differ from its master's (a missed notice); notices with
// scope=offsets then come from the master's host every 50 ms, more often
// than the 1 s interval: the full copy still restores the master's table.
// It did not while the notices kept coming (each restarted the interval).
func TestClusterHASlaveFullCopyDueUnderOffsetNotices(t *testing.T) {
	c := startHACluster(t, Options{Slave: func(_ int, o *broker.Options) { o.SlaveSyncInterval = time.Second }})
	m, s := c.Broker(0), c.Slave(0)
	topicsCopied(t, m, s, 20*time.Second)
	// A change the slave missed: its table has a topic the master's has
	// not, under another data version.
	const stale = "MissedNoticeStale"
	w := s.Topics().Snapshot()
	w.TopicConfigTable[stale] = &protocol.TopicConfig{TopicName: stale, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	w.DataVersion.Counter++
	if err := s.Topics().Replace(w); err != nil {
		t.Fatal(err)
	}

	// Offset notices from the master's host, as an active consumer's
	// commits bring them, until the test ends.
	nc := dialFrom(t, "127.0.0.1", s.Addr())
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	noticeErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			req := protocol.NewRequest(protocol.NotifyMetadataChanged, nil, nil)
			req.ExtFields = protocol.ExtFields{"scope": "offsets"}
			frame, err := protocol.EncodeFrame(req)
			if err == nil {
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err = nc.Write(frame); err == nil {
					var resp *protocol.Command
					if resp, _, err = protocol.ReadFrame(nc, nil, 1<<20); err == nil && resp.Code != protocol.Success {
						err = fmt.Errorf("offset notice answered %d: %s", resp.Code, resp.Remark)
					}
				}
			}
			if err != nil {
				noticeErr <- err
				return
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	testutil.Eventually(t, 15*time.Second, func() error {
		select {
		case err := <-noticeErr:
			t.Fatalf("offset notices: %v", err)
		default:
		}
		if _, ok := s.Topics().Get(stale); ok {
			return errors.New("the slave still has the topic its master has not: no full copy")
		}
		return topicsSame(m, s)
	})
}

// topicsSame reports, as an error, a slave's topic table at another data
// version than its master's.
func topicsSame(m, s *broker.Broker) error {
	if mv, sv := m.Topics().DataVersion(), s.Topics().DataVersion(); mv != sv {
		return fmt.Errorf("slave topic table at %+v, master at %+v", sv, mv)
	}
	return nil
}

// topicsCopied waits until the slave s holds its master m's topic table.
func topicsCopied(t *testing.T, m, s *broker.Broker, within time.Duration) {
	t.Helper()
	testutil.Eventually(t, within, func() error { return topicsSame(m, s) })
}
