package protocol

import "testing"

// TestRemotingOffsetNoticeFieldNames pins the ext field names of an
// offset notice and of the full-copy answers (metasync.go): they are
// wire format, read by slaves of other versions.
func TestRemotingOffsetNoticeFieldNames(t *testing.T) {
	for got, want := range map[string]string{
		FieldOffsetRun: "offsetRun", FieldOffsetFrom: "offsetFrom", FieldOffsetTo: "offsetTo",
		FieldOffsetSeq: "offsetSeq", FieldDelaySeq: "delaySeq",
	} {
		if got != want {
			t.Errorf("field %q, want %q", got, want)
		}
	}
	if NotifyMetadataChanged != 9140 {
		t.Errorf("NOTIFY_METADATA_CHANGED is %d, want 9140", NotifyMetadataChanged)
	}
}
