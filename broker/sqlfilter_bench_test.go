package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// sqlBenchMessages is the queue the SQL92 benchmark filters.
const sqlBenchMessages = 100_000

// BenchmarkBrokerSQL92Pull fills one queue with 10^5 messages of which 1%
// match a SQL92 selector, then drains it over loopback with PULL_MESSAGE
// three ways in the same run: without a filter (every message delivered),
// with the selector on properties only (every record read and evaluated
// on the broker, 1% delivered), and with a selector that also names the
// tag (the consume queue's tag hash rejects 99% before any record is
// read). Each reports queue entries covered per second; the ratios to the
// unfiltered drain are what the filter costs, or saves.
func BenchmarkBrokerSQL92Pull(b *testing.B) {
	br := benchBroker(b)
	br.opts.EnablePropertyFilter = true
	c, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const topic, batch = "SqlBench", 500
	body := make([]byte, 256)
	for i := 0; i < sqlBenchMessages; i += batch {
		var items []byte
		for j := i; j < i+batch; j++ {
			tag, bucket := "cold", strconv.Itoa(j%100)
			if j%100 == 42 {
				tag = "hot"
			}
			items = record.AppendBatchItem(items, 0, body, props(record.PropertyTags, tag, "bucket", bucket,
				"region", []string{"eu", "us", "ap"}[j%3], "n", strconv.Itoa(j), record.PropertyKeys, "k"+strconv.Itoa(j)))
		}
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "bench", Topic: topic, DefaultTopic: AutoCreateTopicKey,
			DefaultTopicQueueNums: 1, QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Batch: true}
		resp, err := c.Invoke(ctx, br.Addr(), protocol.NewRequest(protocol.SendBatchMessage, h.V2(), items))
		if err != nil || resp.Code != protocol.Success {
			b.Fatalf("batch send at %d: %v %v", i, resp, err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for br.Store().MaxOffset(topic, 0) < sqlBenchMessages {
		if time.Now().After(deadline) {
			b.Fatal("queue not dispatched")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// drain pulls the queue to its end and returns the messages delivered.
	drain := func(exprType, expr string) int {
		got := 0
		for off := int64(0); off < sqlBenchMessages; {
			h := &protocol.PullMessageRequestHeader{ConsumerGroup: "bench-" + exprType, Topic: topic, QueueID: 0, QueueOffset: off,
				MaxMsgNums: 32, SysFlag: pullFlagSubscription, Subscription: expr, ExpressionType: exprType}
			resp, err := c.Invoke(ctx, br.Addr(), protocol.NewRequest(protocol.PullMessage, h, nil))
			if err != nil {
				b.Fatal(err)
			}
			var rh protocol.PullMessageResponseHeader
			switch resp.Code {
			case protocol.Success, protocol.PullRetryImmediately:
			default:
				b.Fatalf("pull at %d: %d %s", off, resp.Code, resp.Remark)
			}
			if err := resp.DecodeHeader(&rh); err != nil {
				b.Fatal(err)
			}
			for rest := resp.Body; len(rest) > 0; got++ {
				size, _, err := record.PeekHeader(rest)
				if err != nil {
					b.Fatal(err)
				}
				rest = rest[size:]
			}
			resp.Recycle()
			off = rh.NextBeginOffset
		}
		return got
	}
	ways := []struct {
		name, typ, expr string
		want            int
	}{
		{"unfiltered", protocol.ExpressionTypeTag, "*", sqlBenchMessages},
		{"sql92", protocol.ExpressionTypeSQL92, "bucket = '42' AND region IS NOT NULL", sqlBenchMessages / 100},
		{"sql92-tag", protocol.ExpressionTypeSQL92, "TAGS = 'hot' AND region IS NOT NULL", sqlBenchMessages / 100},
	}
	elapsed := make([]time.Duration, len(ways))
	b.ResetTimer()
	for b.Loop() {
		for i, w := range ways {
			start := time.Now()
			if n := drain(w.typ, w.expr); n != w.want {
				b.Fatalf("%s delivered %d messages, want %d", w.name, n, w.want)
			}
			elapsed[i] += time.Since(start)
		}
	}
	for i, w := range ways {
		rate := float64(b.N) * sqlBenchMessages / elapsed[i].Seconds()
		b.ReportMetric(rate, w.name+"-entries/s")
		if i > 0 {
			b.ReportMetric(elapsed[0].Seconds()/elapsed[i].Seconds(), w.name+"/unfiltered")
		}
	}
}
