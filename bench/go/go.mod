module github.com/libattn/libattn/bench/go

go 1.19

require github.com/libattn/libattn/bindings/go v0.0.0

replace github.com/libattn/libattn/bindings/go => ../../bindings/go
