package packets

import "strings"

// sharePrefix starts a shared subscription filter: $share/<group>/<filter>.
const sharePrefix = "$share/"

// hasWildcard reports whether s holds '+' or '#'. Two IndexByte scans
// (vectorised) cost a fifth of hasWildcard(s)'s byte loop
// on the 60-100 byte topics of request-response traffic, which every
// PUBLISH decoded or encoded checks, its response topic too.
func hasWildcard(s string) bool {
	return strings.IndexByte(s, '+') >= 0 || strings.IndexByte(s, '#') >= 0
}

// ValidTopicName reports whether s may be the topic of a PUBLISH: 1 to 65535
// bytes of UTF-8 without U+0000 and without the wildcards '+' and '#'.
func ValidTopicName(s string) bool {
	if len(s) == 0 || len(s) > maxString || hasWildcard(s) {
		return false
	}
	return validUTF8String(s)
}

// validDecodedTopicName is ValidTopicName for a string reader.str
// decoded (its UTF-8 checked, its length under 65536).
func validDecodedTopicName(s string) bool { return len(s) > 0 && !hasWildcard(s) }

// ValidTopicFilter reports whether s is a valid topic filter: 1 to 65535
// bytes of UTF-8 without U+0000, where '+' fills a whole level and '#' is
// the whole last level. A filter beginning "$share/" must be a well-formed
// shared subscription (see ParseShared) whose inner filter is valid.
func ValidTopicFilter(s string) bool {
	if len(s) == 0 || len(s) > maxString || !validUTF8String(s) {
		return false
	}
	if strings.HasPrefix(s, sharePrefix) {
		_, inner, ok := ParseShared(s)
		return ok && validFilterLevels(inner)
	}
	return validFilterLevels(s)
}

func validFilterLevels(s string) bool {
	for {
		level, rest, more := strings.Cut(s, "/")
		if hasWildcard(level) {
			switch {
			case level == "+":
			case level == "#" && !more:
			default:
				return false
			}
		}
		if !more {
			return true
		}
		s = rest
	}
}

// IsShared reports whether filter names a shared subscription, that is
// starts with "$share/".
func IsShared(filter string) bool { return strings.HasPrefix(filter, sharePrefix) }

// ParseShared splits a shared subscription "$share/<group>/<filter>" into
// its share name and topic filter. ok is false if filter does not start with
// "$share/", or if the share name is empty or holds '/', '+' or '#', or if
// no non-empty filter follows it. The inner filter is not validated here
// (ValidTopicFilter does that).
func ParseShared(filter string) (group, topicFilter string, ok bool) {
	rest, found := strings.CutPrefix(filter, sharePrefix)
	if !found {
		return "", "", false
	}
	group, topicFilter, found = strings.Cut(rest, "/")
	if !found || group == "" || topicFilter == "" || hasWildcard(group) {
		return "", "", false
	}
	return group, topicFilter, true
}

// Match reports whether topic name topic matches topic filter filter. '+'
// matches exactly one level (possibly empty), '#' matches its parent level
// and any number of levels below ("a/#" matches "a", "a/b", "a/b/c"). Topics
// starting with '$' are not matched by a filter starting with a wildcard
// ("#" does not match "$SYS/x"). A shared subscription must be matched with
// its inner filter (ParseShared). Match does not allocate.
func Match(filter, topic string) bool {
	if len(topic) > 0 && topic[0] == '$' && len(filter) > 0 && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	for {
		fl, frest, fmore := strings.Cut(filter, "/")
		if fl == "#" {
			return true
		}
		tl, trest, tmore := strings.Cut(topic, "/")
		if fl != "+" && fl != tl {
			return false
		}
		switch {
		case !fmore && !tmore:
			return true
		case !tmore:
			return frest == "#" // "a/#" matches "a"
		case !fmore:
			return false
		}
		filter, topic = frest, trest
	}
}
