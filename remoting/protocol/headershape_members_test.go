package protocol

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// goMapOrderSend is a send header as rocketmq-client-go v2.1.2 writes it:
// its top-level members in its struct's order, the extFields members in
// the order perm gives (Go's map order, new for almost every request).
func goMapOrderSend(opaque, queue int, born int64, uniq string, perm []int) []byte {
	members := []string{
		`"producerGroup":"pg"`, `"topic":"T"`, `"defaultTopic":"TBW102"`, `"defaultTopicQueueNums":"4"`,
		fmt.Sprintf(`"queueId":"%d"`, queue), `"sysFlag":"0"`, fmt.Sprintf(`"bornTimestamp":"%d"`, born),
		`"flag":"0"`, `"properties":"UNIQ_KEY\u0001` + uniq + `\u0002"`, `"reconsumeTimes":"0"`,
		`"unitMode":"false"`, `"maxReconsumeTimes":"0"`, `"batch":"false"`,
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"code":10,"language":"GO","version":317,"opaque":%d,"flag":0,"remark":"","extFields":{`, opaque)
	for i, k := range perm {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(members[k])
	}
	b.WriteString("}}")
	return []byte(b.String())
}

// A client whose sends come with their members in a new order each time
// is read through the member table once learning pauses: each send takes
// the template (its constant members copied, the queue, born time and
// properties read by value) and decodes exactly as the one pass reads it.
// A send with a member the table does not have, or without one it has,
// is read without the template, and the table is learned again when a
// client's members change for good.
func TestRemotingHeaderMembersAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var s HeaderShapes
	templated := 0
	for i := range 200 {
		hdr := goMapOrderSend(i, i%8, 1764120000000+int64(i), fmt.Sprintf("C0000202%024X", i), rng.Perm(13))
		checkShapes(t, hdr, goMapOrderSend(0, 3, 1764120000000, "C0", rng.Perm(13)))
		var c Command
		if !s.decode(bytes.Clone(hdr), &c, allRaw, true) {
			t.Fatalf("header %d not read", i)
		}
		if c.shaped.tmpl != nil {
			templated++
			// The born time and the properties, and the queue unless it
			// is the one the table was learned with.
			if c.shaped.n != 2 && c.shaped.n != 3 {
				t.Fatalf("header %d: %d members read by value", i, c.shaped.n)
			}
		}
		checkShapedSend(t, hdr, nil, &c, allRaw)
	}
	if s.pause == 0 || s.wasted < shapeSlots {
		t.Fatalf("learning did not pause (pause %d, wasted %d)", s.pause, s.wasted)
	}
	if want := `{"code":10,"language":"GO","version":317,"opaque":,"flag":0,"remark":"","extFields":`; string(s.members.head.text) != want {
		t.Fatalf("head %q, want %q", s.members.head.text, want)
	}
	// Two learns into the shape slots, one pause of 16, then one learn
	// per doubling pause: all but a few sends take the template.
	if templated < 180 {
		t.Fatalf("%d of 200 sends took the member template", templated)
	}

	// The head's text, then a member after the extFields: read from the
	// start, as the one pass reads it.
	more := bytes.Replace(goMapOrderSend(1, 1, 5, "u", rng.Perm(13)), []byte(`}}`), []byte(`},"serializeTypeCurrentRPC":"JSON"}`), 1)
	var c Command
	if !s.decode(bytes.Clone(more), &c, allRaw, true) || c.shaped.tmpl == nil || c.Opaque != 1 {
		t.Fatalf("a member after the extFields: template %v, opaque %d", c.shaped.tmpl != nil, c.Opaque)
	}
	checkShapes(t, more, goMapOrderSend(0, 3, 1764120000000, "C0", rng.Perm(13)))
	// Another key: read without the template, decoded as the one pass.
	odd := bytes.Replace(goMapOrderSend(1, 1, 5, "u", rng.Perm(13)), []byte(`"batch":"false"`), []byte(`"other":"false"`), 1)
	c = Command{}
	if !s.decode(bytes.Clone(odd), &c, allRaw, true) || c.shaped.tmpl != nil {
		t.Fatalf("a send with another key: read %v, template %v", c.list != "", c.shaped.tmpl != nil)
	}
	checkShapes(t, odd, goMapOrderSend(0, 3, 1764120000000, "C0", rng.Perm(13)))
	// One member fewer: no template either.
	short := bytes.Replace(goMapOrderSend(1, 1, 5, "u", rng.Perm(13)), []byte(`"flag":"0",`), nil, 1)
	if bytes.Contains(short, []byte(`"flag":"0"}`)) {
		short = bytes.Replace(short, []byte(`,"flag":"0"}`), []byte("}"), 1)
	}
	c = Command{}
	if !s.decode(bytes.Clone(short), &c, allRaw, true) || c.shaped.tmpl != nil {
		t.Fatalf("a send without a member: template %v", c.shaped.tmpl != nil)
	}
	checkShapes(t, short, goMapOrderSend(0, 3, 1764120000000, "C0", rng.Perm(13)))

	// The client's topic changes for good: after a few sends the table is
	// learned again and its sends take the template.
	s.pause = maxLearnPause // stay in the member path
	templated = 0
	for i := range 20 {
		hdr := bytes.Replace(goMapOrderSend(i, i%8, int64(i), "v", rng.Perm(13)), []byte(`"topic":"T"`), []byte(`"topic":"Other"`), 1)
		c = Command{}
		if !s.decode(bytes.Clone(hdr), &c, allRaw, true) {
			t.Fatal("not read")
		}
		if c.shaped.tmpl != nil {
			templated++
		}
		checkShapedSend(t, hdr, nil, &c, allRaw)
	}
	if templated < 18 {
		t.Fatalf("after the topic changed, %d of 20 sends took the template", templated)
	}
}

// A client whose headers become the same every time (its extFields in
// one order) gets its shape back once the pause it started runs out.
func TestRemotingHeaderMembersPauseEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var s HeaderShapes
	for i := range 100 {
		var c Command
		s.decode(goMapOrderSend(i, i%8, int64(i), "u", rng.Perm(13)), &c, allRaw, true)
	}
	if s.pause == 0 {
		t.Fatal("learning did not pause")
	}
	perm := rng.Perm(13)
	for i := range maxLearnPause + 10 {
		hdr := goMapOrderSend(i, i%8, int64(i), "v", perm)
		if i > 0 && s.pause == 0 && matchedShape(&s, hdr) {
			return
		}
		var c Command
		s.decode(bytes.Clone(hdr), &c, allRaw, true)
	}
	t.Fatalf("no shape after the pause (pause %d, wasted %d)", s.pause, s.wasted)
}

// A scalar member of the table matches only where it ends: "n":1 is not
// the start of "n":12.
func TestRemotingHeaderMembersScalarEnd(t *testing.T) {
	first := []byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","n":1,"properties":"p"}}`)
	next := []byte(`{"code":10,"language":"GO","version":317,"opaque":2,"flag":0,"remark":"","extFields":{"n":12,"topic":"T","properties":"q"}}`)
	checkShapes(t, next, first)
	var s HeaderShapes
	s.pause = maxLearnPause
	var c Command
	s.decode(bytes.Clone(first), &c, allRaw, true)
	c = Command{}
	if !s.decode(bytes.Clone(next), &c, allRaw, true) {
		t.Fatal("not read")
	}
	if got := c.Fields()["n"]; got != "12" {
		t.Fatalf("n = %q, want 12", got)
	}
}

// FuzzHeaderMembers: any header read through a member table learned from
// another decodes exactly as the one pass reads it.
func FuzzHeaderMembers(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	f.Add(goMapOrderSend(1, 0, 1, "u", rng.Perm(13)), goMapOrderSend(2, 1, 2, "v", rng.Perm(13)))
	f.Add([]byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","n":1,"properties":"p"}}`),
		[]byte(`{"code":10,"language":"GO","version":317,"opaque":2,"flag":0,"remark":"","extFields":{"n":12,"topic":"T","properties":"q\u0001"}}`))
	f.Fuzz(func(t *testing.T, learn, hdr []byte) {
		checkShapes(t, hdr, learn)
	})
}

// A send read through the member table allocates nothing.
func TestRemotingHeaderMembersAllocate(t *testing.T) {
	if raceBuild {
		t.Skip("allocations counted without -race")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var frames [][]byte
	for i := range 64 {
		frames = append(frames, goMapOrderSend(i, i%8, int64(1764120000000+i), fmt.Sprintf("%032X", i), rng.Perm(13)))
	}
	var s HeaderShapes
	var c Command
	work := make([]byte, 1024)
	for _, f := range frames { // the pause starts, the table is learned
		s.decode(work[:copy(work, f)], &c, allRaw, true)
	}
	s.pause = maxLearnPause
	n := 0
	if a := testing.AllocsPerRun(200, func() {
		n++
		f := frames[n%len(frames)]
		if !s.decode(work[:copy(work, f)], &c, allRaw, true) || c.shaped.tmpl == nil || !c.lent {
			t.Fatal("not read through the table")
		}
	}); a != 0 {
		t.Fatalf("%v allocations per decode", a)
	}
}
