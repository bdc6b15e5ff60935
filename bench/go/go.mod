module libattn/bench/go

go 1.19

require libattn/attn v0.0.0

replace libattn/attn => ../../bindings/go
