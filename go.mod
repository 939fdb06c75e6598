module github.com/smartgo/smartgo

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/klauspost/compress v1.20.3
	github.com/valyala/bytebufferpool v1.0.0
	golang.org/x/sys v0.49.0
)
