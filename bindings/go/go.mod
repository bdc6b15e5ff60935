module github.com/libattn/libattn/bindings/go

go 1.19
