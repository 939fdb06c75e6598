package protocol

import (
	"fmt"
	"testing"
)

// goPullHeader is rocketmq-client-go's PULL_MESSAGE header.
func goPullHeader(opaque, queue int, off int64) []byte {
	return fmt.Appendf(nil, `{"code":11,"extFields":{"commitOffset":"0","consumerGroup":"cg","expressionType":"TAG","maxMsgNums":"32",`+
		`"queueId":"%d","queueOffset":"%d","subVersion":"0","subscription":"*","suspendTimeoutMillis":"20000","sysFlag":"2","topic":"T"},`+
		`"flag":0,"language":"GO","opaque":%d,"remark":"","version":317}`, queue, off, opaque)
}

// A pull read by its learned shape allocates nothing, as a send does.
func TestRemotingHeaderShapesPullAllocate(t *testing.T) {
	if raceBuild {
		t.Skip("allocations counted without -race")
	}
	var s HeaderShapes
	var c Command
	var frames [][]byte
	for q := range 8 {
		frames = append(frames, goPullHeader(q, q, int64(q)*100))
	}
	work := make([]byte, 1024)
	n := 0
	decode := func() {
		n++
		f := frames[n%len(frames)]
		buf := work[:len(f)]
		copy(buf, f)
		if !s.decode(buf, &c, allRaw, true) || !c.lent {
			t.Fatal("not decoded")
		}
	}
	for range 16 {
		decode()
	}
	if a := testing.AllocsPerRun(100, decode); a != 0 {
		t.Fatalf("%v allocations per pull decode", a)
	}
}
