package broker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
)

// javaRuntimeKeys are the keys a RocketMQ 4.9.8 broker (default store,
// no transient pool) puts in GET_BROKER_RUNTIME_INFO.
var javaRuntimeKeys = []string{
	"bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
	"putMessageSizeTotal", "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer",
	"getMessageEntireTimeMax", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps",
	"putLatency99", "putLatency999", "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset",
	"commitLogMaxOffset", "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning",
	"msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning",
	"msgGetTotalTodayNow", "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize",
	"pullThreadPoolQueueCapacity", "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity",
	"EndTransactionQueueSize", "EndTransactionThreadPoolQueueCapacity", "dispatchBehindBytes",
	"pageCacheLockTimeMills", "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
	"queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp", "startAcceptSendRequestTimeStamp",
	"remainTransientStoreBufferNumbs", "remainHowManyDataToFlush", "commitLogDirCapacity",
}

// clusterListRow formats a broker's row as mqadmin 4.9.8 clusterList does
// from the runtime table, failing where mqadmin would print null or throw.
func clusterListRow(t *testing.T, kv map[string]string) string {
	t.Helper()
	first := func(key string) float64 {
		f, err := strconv.ParseFloat(strings.Split(kv[key], " ")[0], 64)
		if err != nil {
			t.Fatalf("%s=%q: mqadmin cannot parse it: %v", key, kv[key], err)
		}
		return f
	}
	in, out := first("putTps"), first("getTransferedTps")
	earliest, err := strconv.ParseInt(kv["earliestMessageTimeStamp"], 10, 64)
	if err != nil {
		t.Fatalf("earliestMessageTimeStamp=%q: %v", kv["earliestMessageTimeStamp"], err)
	}
	space, err := strconv.ParseFloat(kv["commitLogDiskRatio"], 64)
	if err != nil {
		t.Fatalf("commitLogDiskRatio=%q: %v", kv["commitLogDiskRatio"], err)
	}
	hour := float64(time.Now().UnixMilli()-earliest) / 1000 / 60 / 60
	row := fmt.Sprintf("%-16s %9.2f(%s,%sms) %9.2f(%s,%sms) %10s %5s %6s", kv["brokerVersionDesc"],
		in, kv["sendThreadPoolQueueSize"], kv["sendThreadPoolQueueHeadWaitTimeMills"],
		out, kv["pullThreadPoolQueueSize"], kv["pullThreadPoolQueueHeadWaitTimeMills"],
		kv["pageCacheLockTimeMills"], fmt.Sprintf("%2.2f", hour), fmt.Sprintf("%.4f", space))
	for _, key := range []string{"brokerVersionDesc", "sendThreadPoolQueueSize", "sendThreadPoolQueueHeadWaitTimeMills",
		"pullThreadPoolQueueSize", "pullThreadPoolQueueHeadWaitTimeMills", "pageCacheLockTimeMills"} {
		if kv[key] == "" {
			t.Fatalf("clusterList would print null for %s: %s", key, row)
		}
	}
	return row
}

// GET_BROKER_RUNTIME_INFO, asked as mqadmin asks it, answers every key a
// RocketMQ 4.9 broker answers, with values mqadmin clusterList and
// brokerStatus can read, and that follow what the broker did.
func TestBrokerRuntimeInfoAsMQAdminSeesIt(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	c := newTestClient(t, b.Addr())
	for i := 0; i < 5; i++ {
		c.mustSend("Runtime", 0, "body-"+itoa(i), "")
	}
	waitDispatched(t, b, "Runtime", 0, 5)
	if r := c.pull("rg", "Runtime", 0, 0, flagSubscription, 0, "*"); len(r.msgs) != 5 {
		t.Fatalf("pulled %d", len(r.msgs))
	}
	c.pull("rg", "Runtime", 0, 5, flagSubscription, 0, "*") // a miss

	resp := javaInvoke(t, b.Addr(), protocol.GetBrokerRuntimeInfo, nil, nil)
	var kv protocol.KVTable
	if resp.Code != protocol.Success || protocol.DecodeJSON(resp.Body, &kv) != nil {
		t.Fatalf("runtime info: %d %s", resp.Code, resp.Remark)
	}
	var missing []string
	for _, k := range javaRuntimeKeys {
		if _, ok := kv.Table[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("keys RocketMQ reports are missing: %v", missing)
	}
	num := func(key string) int64 {
		t.Helper()
		n, err := strconv.ParseInt(kv.Table[key], 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", key, kv.Table[key], err)
		}
		return n
	}
	if kv.Table["brokerVersionDesc"] != "V4_9_8" || kv.Table["brokerVersion"] != "409" {
		t.Errorf("version %q %q", kv.Table["brokerVersionDesc"], kv.Table["brokerVersion"])
	}
	if num("putMessageTimesTotal") != 5 || num("msgPutTotalTodayNow") != 5 || num("msgGetTotalTodayNow") != 5 ||
		num("putMessageSizeTotal") == 0 || num("sendThreadPoolQueueCapacity") != 10000 || num("pageCacheLockTimeMills") != 0 {
		t.Errorf("counters: %v", kv.Table)
	}
	for _, key := range []string{"putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps"} {
		parts := strings.Split(kv.Table[key], " ")
		if len(parts) != 3 {
			t.Errorf("%s=%q: want three windows", key, kv.Table[key])
		}
		for _, p := range parts {
			if f, err := strconv.ParseFloat(p, 64); err != nil || f < 0 {
				t.Errorf("%s=%q", key, kv.Table[key])
			}
		}
	}
	if !strings.HasPrefix(kv.Table["runtime"], "[ 0 days, 0 hours, ") || !strings.HasPrefix(kv.Table["putMessageDistributeTime"], "[<=0ms]:") ||
		!strings.HasPrefix(kv.Table["commitLogDirCapacity"], "Total : ") {
		t.Errorf("text values: %q %q %q", kv.Table["runtime"], kv.Table["putMessageDistributeTime"], kv.Table["commitLogDirCapacity"])
	}
	if r, err := strconv.ParseFloat(kv.Table["commitLogDiskRatio"], 64); err != nil || r <= 0 || r > 1 {
		t.Errorf("commitLogDiskRatio %q", kv.Table["commitLogDiskRatio"])
	}
	row := clusterListRow(t, kv.Table)
	if strings.Contains(row, "null") || !strings.Contains(row, "V4_9_8") {
		t.Fatalf("clusterList row %q", row)
	}
	t.Logf("clusterList row: %s", row)
}

// The 10 s / 60 s / 600 s rates follow the counters sampled every second;
// windows longer than the history kept so far use what there is.
func TestBrokerRuntimeRates(t *testing.T) {
	clk := &manualClock{t: time.Date(2026, 3, 1, 23, 59, 0, 0, time.Local)}
	var puts int64
	r := newRuntimeStats(clk.now, func() int64 { return puts })
	r.sample()
	for i := 0; i < 30; i++ { // 30 s at 100 puts/s and 10 transferred/s
		clk.advance(time.Second)
		puts += 100
		r.getTransferred.Add(10)
		r.getFound.Add(1)
		r.sample()
	}
	if got := r.tps(ratePut); got != "100.0 100.0 100.0" {
		t.Fatalf("putTps %q", got)
	}
	for i := 0; i < 10; i++ { // 10 s idle
		clk.advance(time.Second)
		r.getMiss.Add(2)
		r.sample()
	}
	if got := r.tps(ratePut); got != "0.0 75.0 75.0" {
		t.Fatalf("putTps after idle %q", got)
	}
	if got := r.tps(rateTransferred); got != "0.0 7.5 7.5" {
		t.Fatalf("getTransferedTps %q", got)
	}
	if got := r.totalTPS(); got != "2.0 1.25 1.25" {
		t.Fatalf("getTotalTps %q", got)
	}
	// Past midnight the day totals roll over.
	clk.advance(30 * time.Second)
	r.sample()
	if put, get := r.dayTotals(); put != [2]int64{0, 3000} || get != [2]int64{0, 300} {
		t.Fatalf("day totals %v %v", put, get)
	}
}

// The put latency distribution and percentiles describe the last full
// minute, in RocketMQ's buckets.
func TestBrokerRuntimePutLatency(t *testing.T) {
	clk := &manualClock{t: time.Unix(1_700_000_000, 0)}
	r := newRuntimeStats(clk.now, func() int64 { return 0 })
	for i := 0; i < 990; i++ {
		r.observePut(150 * time.Microsecond)
	}
	for i := 0; i < 10; i++ {
		r.observePut(30 * time.Millisecond)
	}
	r.observePut(12 * time.Second)
	if got := r.putDistribution(); !strings.HasPrefix(got, "[<=0ms]:0 ") {
		t.Fatalf("distribution before a minute passed: %q", got)
	}
	clk.advance(time.Minute)
	r.sample()
	want := "[<=0ms]:990 [0~10ms]:0 [10~50ms]:10 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 "
	if got := r.putDistribution(); got != want {
		t.Fatalf("distribution\n%q\nwant\n%q", got, want)
	}
	if p := r.putPercentile(0.5); p <= 0.1 || p > 0.2 {
		t.Fatalf("p50 %v ms", p)
	}
	if p := r.putPercentile(0.995); p < 28 || p > 30 {
		t.Fatalf("p99.5 %v ms", p)
	}
	if m := r.putMaxMs.Load(); m != 12000 {
		t.Fatalf("max %d", m)
	}
}

// Every send is timed once for the runtime statistics (putLatency99,
// putMessageDistributeTime), by the time its put took in the store
// (store.PutResult.Latency): a send written behind and answered at the
// reader's batch end, and one that waits for the group commit.
func TestBrokerSendsTimedOnce(t *testing.T) {
	for _, mode := range []store.FlushMode{store.FlushAsync, store.FlushSync} {
		t.Run(mode.String(), func(t *testing.T) {
			b := testBroker(t, t.TempDir(), func(o *Options) { o.Store.FlushMode = mode })
			c := newTestClient(t, b.Addr())
			const sends = 7
			for i := range sends {
				c.mustSend("Timed", 0, "body-"+itoa(i), "")
			}
			var dist, lat int64
			for i := range b.rt.putDist {
				dist += b.rt.putDist[i].Load()
			}
			for i := range b.rt.putLatency {
				lat += b.rt.putLatency[i].Load()
			}
			if dist != sends || lat != sends {
				t.Fatalf("%d sends timed %d times in the distribution and %d in the latency histogram", sends, dist, lat)
			}
			if m := b.rt.putMaxMs.Load(); m < 0 || m > 60_000 {
				t.Fatalf("put max %d ms", m)
			}
		})
	}
}
