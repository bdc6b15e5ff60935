module libattn/attn

go 1.19
