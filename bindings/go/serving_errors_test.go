package attn

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// Errors of the serving layouts: bad block tables, lengths and prefix sums, each named by the
// sequence and the slot.

// servErrorSetup is a paged varlen call (page 3, token-major) of the standard sequences with
// its pools filled directly, ready to run; bend it and look at the error.
type servErrorSetup struct {
	d          *Desc
	a          *Args
	p          servPack
	c          servPaged
	kPool      []float32
	vPool      []float32
	lens       []int32
	out, lse   []float32
	nk, nv     []float32
	newCu      []int32
	tableClean []int32
}

func newErrorSetup(t *testing.T) *servErrorSetup {
	seqs := servSequences(3)
	s := &servErrorSetup{p: newPack(seqs, servHKV*servD)}
	s.c = newPaged(t, seqs, 3, (s.p.maxK+2)/3, false, 1)
	s.tableClean = append([]int32{}, s.c.table...)
	s.kPool, s.vPool = filled(s.c.poolLen(), servNaN), filled(s.c.poolLen(), servNaN)
	for b, q := range seqs {
		for h := 0; h < servHKV; h++ {
			for j := 0; j < q.lk; j++ {
				copy(s.kPool[s.c.at(b, h, j):][:servD], q.k[(h*q.lk+j)*servD:])
				copy(s.vPool[s.c.at(b, h, j):][:servD], q.v[(h*q.lk+j)*servD:])
			}
		}
		s.lens = append(s.lens, int32(q.lk))
	}
	s.d = mustDesc(t, len(seqs), servHQ, servHKV, s.p.maxQ, s.p.maxK, servD,
		append(s.c.options(), WithVarlen(), WithCausal(CausalBottomRight))...)
	var err error
	s.a, err = s.d.NewArgs()
	must(t, err)
	s.out, s.lse = make([]float32, s.p.totalQ*servHQ*servD), make([]float32, s.p.totalQ*servHQ)
	s.nk, s.nv, s.newCu = newRows(seqs, func(b int) int { return seqs[b].lk - seqs[b].lq },
		func(b int) int { return seqs[b].lk })
	must(t, s.a.SetF32(OperandQ, s.p.q), s.a.SetF32(OperandK, s.kPool), s.a.SetF32(OperandV, s.vPool),
		s.a.SetCuSeqlensQ(s.p.cuQ), s.a.SetSeqLensK(s.lens), s.a.SetBlockTable(s.c.table),
		s.a.SetOutF32(OperandOut, s.out), s.a.SetOutF32(OperandLSE, s.lse), s.a.SetNewK(s.nk), s.a.SetNewV(s.nv))
	return s
}

func (s *servErrorSetup) close() { s.a.Close(); s.d.Close() }

// Bad block tables, lengths and prefix sums: an error naming the slot or the index, never a
// panic, never a wild read; slices shorter than required are refused in Go before any pointer
// reaches C (for the operands whose length the descriptor fixes), or by the library for a
// pack's own length.
func TestServingErrors(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	s := newErrorSetup(t)
	defer s.close()
	must(t, s.a.Run(OpForward)) // the setup itself is fine
	must(t, s.a.KVAppend(s.kPool, s.vPool))
	mp, np := s.c.maxPages, s.c.numPages
	if mp != 22 || s.d.RequiredLen(OperandBlockTable) != 66 {
		t.Fatalf("max_pages %d, block table %d", mp, s.d.RequiredLen(OperandBlockTable))
	}
	bent := func(what string, bend func(), undo func(), st Status, parts ...string) {
		t.Helper()
		bend()
		err := s.a.Run(OpForward)
		if err == nil {
			t.Errorf("%s: Run succeeded", what)
		} else {
			wantError(t, err, st, parts...)
		}
		undo()
		must(t, s.a.Run(OpForward))
	}
	table := s.c.table
	setTable := func(slot int, id int32) func() {
		return func() { table[slot] = id }
	}
	restore := func() { copy(table, s.tableClean) }

	bent("page id out of range", setTable(1*mp+2, 99), restore, StatusInvalidArgument,
		fmt.Sprintf("attn_run: block_table[1][2] (99) is not a page of the K/V buffers, which hold %d pages", np))
	bent("page id = num_pages", setTable(2*mp+21, int32(np)), restore, StatusInvalidArgument,
		fmt.Sprintf("block_table[2][21] (%d) is not a page", np))
	bent("negative page id", setTable(2*mp, -7), restore, StatusInvalidArgument, "block_table[2][0] (-7) is not a page")
	bent("-1 among the used slots", setTable(0*mp+1, -1), restore, StatusInvalidArgument,
		"block_table[0][1] is -1 (unused) but sequence 0 has 40 keys")
	// a -1 right after the used slots is fine: sequence 1 (7 keys, page 3) uses slots 0..2
	if table[1*mp+3] != -1 {
		t.Fatalf("slot [1][3] is not unused")
	}
	bent("a pool too short for its page ids", func() { must(t, s.a.SetF32(OperandK, s.kPool[:3*servHKV*servD])) },
		func() { must(t, s.a.SetF32(OperandK, s.kPool)) }, StatusInvalidArgument,
		"is not a page of the K/V buffers, which hold 1 pages")
	bent("seq_lens_k above seq_k", func() { s.lens[1] = 67 }, func() { s.lens[1] = 7 }, StatusInvalidArgument,
		"seq_lens_k[1] (67) is outside [0, seq_k = 66]")
	bent("negative seq_lens_k", func() { s.lens[2] = -1 }, func() { s.lens[2] = 66 }, StatusInvalidArgument,
		"seq_lens_k[2] (-1) is outside [0, seq_k = 66]")
	cu := s.p.cuQ
	bent("cu_seqlens_q[0] != 0", func() { cu[0] = 1 }, func() { cu[0] = 0 }, StatusInvalidArgument,
		"cu_seqlens_q[0] (1) must be 0")
	bent("decreasing cu_seqlens_q", func() { cu[2] = 4 }, func() { cu[2] = 5 }, StatusInvalidArgument,
		"cu_seqlens_q must not decrease: cu_seqlens_q[1] = 5 > cu_seqlens_q[2] = 4")
	bent("a sequence longer than seq_q", func() { cu[3] = 15 }, func() { cu[3] = 14 }, StatusInvalidArgument,
		"cu_seqlens_q: sequence 2 has length 10, above seq_q = 9")
	bent("q shorter than the pack", func() { must(t, s.a.SetF32(OperandQ, s.p.q[:19])) },
		func() { must(t, s.a.SetF32(OperandQ, s.p.q)) }, StatusInvalidArgument,
		fmt.Sprintf("attn_run: q has 19 elements, needs at least %d", 14*servHQ*servD))
	bent("lse shorter than the pack", func() { must(t, s.a.SetOutF32(OperandLSE, s.lse[:55])) },
		func() { must(t, s.a.SetOutF32(OperandLSE, s.lse)) }, StatusInvalidArgument,
		"lse has 55 elements, needs at least 56")
	bent("no block table", func() { must(t, s.a.SetBlockTable(nil)) }, func() { must(t, s.a.SetBlockTable(table)) },
		StatusNullPointer, "block_table is NULL but ATTN_PARAM_PAGE_SIZE is set")
	bent("no seq_lens_k", func() { must(t, s.a.SetSeqLensK(nil)) }, func() { must(t, s.a.SetSeqLensK(s.lens)) },
		StatusNullPointer, "seq_lens_k is NULL")
	bent("cu_seqlens_k with pages", func() { must(t, s.a.SetCuSeqlensK(s.p.cuK)) },
		func() { must(t, s.a.SetCuSeqlensK(nil)) }, StatusInvalidArgument,
		"cu_seqlens_k is bound but a paged cache takes its key lengths from seq_lens_k")
	bent("a bias in a varlen call", func() { must(t, s.a.SetF32(OperandBias, make([]float32, s.d.RequiredLen(OperandBias)))) },
		func() { must(t, s.a.SetF32(OperandBias, nil)) }, StatusUnsupported, "bias is not supported with ATTN_PARAM_VARLEN")
	must(t, s.a.SetOutF32(OperandWeights, make([]float32, s.d.RequiredLen(OperandWeights))))
	wantError(t, s.a.Run(OpWeights), StatusUnsupported, "ATTN_OP_WEIGHTS is not supported with ATTN_PARAM_VARLEN")
	must(t, s.a.SetOutF32(OperandWeights, nil))

	// Lengths: the library's checks in Run, naming the operand.
	for _, c := range []struct {
		what       string
		bend, undo func() error
		want       string
	}{
		{"short block table", func() error { return s.a.SetBlockTable(table[:len(table)-1]) },
			func() error { return s.a.SetBlockTable(table) }, "block_table has 65 elements, needs at least 66"},
		{"empty block table", func() error { return s.a.SetBlockTable([]int32{}) },
			func() error { return s.a.SetBlockTable(table) }, "block_table has 0 elements, needs at least 66"},
		{"short cu_seqlens_q", func() error { return s.a.SetCuSeqlensQ(cu[:3]) },
			func() error { return s.a.SetCuSeqlensQ(cu) }, "cu_seqlens_q has 3 elements, needs at least 4"},
		{"short seq_lens_k", func() error { return s.a.SetSeqLensK(s.lens[:2]) },
			func() error { return s.a.SetSeqLensK(s.lens) }, "seq_lens_k has 2 elements, needs at least 3"},
		{"a pool below one page", func() error { return s.a.SetF32(OperandK, s.kPool[:3*servHKV*servD-1]) },
			func() error { return s.a.SetF32(OperandK, s.kPool) },
			fmt.Sprintf("k has %d elements, needs at least %d", 3*servHKV*servD-1, 3*servHKV*servD)},
	} {
		bent(c.what, func() { must(t, c.bend()) }, func() { must(t, c.undo()) }, StatusInvalidArgument, c.want)
	}
	// The operand and the setter: the library's verdict when the setter is called.
	for _, c := range []struct {
		err  error
		want string
	}{
		{s.a.SetF32(OperandBlockTable, s.kPool), "attn_args_set_f32: block_table is bound with attn_args_set_i32, not attn_args_set_f32"},
		{s.a.SetI32(OperandNewK, table), "new_k is bound with attn_args_set_f32, not attn_args_set_i32"},
		{s.a.SetOutF32(OperandNewV, s.out), "new_v is bound with attn_args_set_f32, not attn_args_set_out_f32"},
		{s.a.SetI32(Operand(255), table), "which (255) is not an attn_operand"},
		{s.a.KVAppend(s.kPool[:10], s.vPool), fmt.Sprintf("k_cache has 10 elements, needs at least %d", 3*servHKV*servD)},
		{s.a.KVAppend(s.kPool, []float32{}), fmt.Sprintf("v_cache has 0 elements, needs at least %d", 3*servHKV*servD)},
	} {
		wantError(t, c.err, StatusInvalidArgument, c.want)
	}
	wantError(t, s.a.KVAppend(nil, s.vPool), StatusNullPointer, "k_cache is NULL")
	wantError(t, s.a.KVAppend(s.kPool, nil), StatusNullPointer, "v_cache is NULL")
	must(t, s.a.Run(OpForward)) // the refused setters left the bindings as they were

	// KVAppend: the library's checks, naming the sequence and the slot
	wantError(t, s.a.KVAppend(s.kPool, s.kPool), StatusInvalidArgument, "attn_kv_append:", "overlaps")
	table[2*mp] = 1000
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusInvalidArgument,
		fmt.Sprintf("attn_kv_append: block_table[2][0] (1000) is not a page of the K/V buffers, which hold %d pages", np))
	restore()
	s.lens[0] = 4 // sequence 0 appends 5 tokens
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusInvalidArgument,
		"seq_lens_k[0] (4) is less than the 5 new tokens of sequence 0")
	s.lens[0] = 40
	must(t, s.a.SetNewK(s.nk[:10]))
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusInvalidArgument,
		fmt.Sprintf("attn_kv_append: new_k has 10 elements, needs at least %d", 14*servHKV*servD))
	must(t, s.a.SetNewK(nil))
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusNullPointer, "attn_kv_append: new_k is NULL")
	must(t, s.a.SetNewK(s.nk))
	must(t, s.a.SetCuSeqlensQ(nil))
	wantError(t, s.a.KVAppend(s.kPool, s.vPool), StatusNullPointer, "cu_seqlens_q is NULL but ATTN_PARAM_VARLEN is 1")
	must(t, s.a.SetCuSeqlensQ(cu))
	must(t, s.a.KVAppend(s.kPool, s.vPool), s.a.Run(OpForward))

	// After Close.
	closed, err := s.d.NewArgs()
	must(t, err)
	closed.Close()
	if err := closed.KVAppend(s.kPool, s.vPool); !errors.Is(err, ErrArgsClosed) {
		t.Errorf("KVAppend after Close: %v", err)
	}
	if err := (*Args)(nil).KVAppend(s.kPool, s.vPool); !errors.Is(err, ErrArgsClosed) {
		t.Errorf("KVAppend on nil: %v", err)
	}

	// A dense descriptor fixes the new rows' length (batch x seq_q tokens): the library checks it.
	dd := mustDesc(t, 3, servHQ, servHKV, 2, 10, servD, WithPageSize(4))
	defer dd.Close()
	da, err := dd.NewArgs()
	must(t, err)
	defer da.Close()
	must(t, da.SetNewK(make([]float32, 3*2*servHKV*servD-1)), da.SetNewV(make([]float32, 3*2*servHKV*servD)),
		da.SetSeqLensK([]int32{2, 2, 2}), da.SetBlockTable(make([]int32, dd.RequiredLen(OperandBlockTable))))
	pool := make([]float32, 4*servHKV*servD)
	wantError(t, da.KVAppend(pool, pool[:len(pool):len(pool)]), StatusInvalidArgument,
		fmt.Sprintf("new_k has %d elements, needs at least %d", 3*2*servHKV*servD-1, 3*2*servHKV*servD))
	// an unpaged varlen pack takes its key positions from cu_seqlens_k
	vd := mustDesc(t, 3, servHQ, servHKV, 9, 66, servD, WithVarlen())
	defer vd.Close()
	va, err := vd.NewArgs()
	must(t, err)
	defer va.Close()
	cuK := append([]int32{}, s.p.cuK...)
	must(t, va.SetF32(OperandQ, s.p.q), va.SetF32(OperandK, s.p.k), va.SetF32(OperandV, s.p.v), va.SetCuSeqlensQ(cu),
		va.SetOutF32(OperandOut, s.out))
	wantError(t, va.Run(OpForward), StatusNullPointer, "cu_seqlens_k is NULL but ATTN_PARAM_VARLEN is 1")
	cuK[2] = 39
	must(t, va.SetCuSeqlensK(cuK))
	wantError(t, va.Run(OpForward), StatusInvalidArgument, "cu_seqlens_k must not decrease: cu_seqlens_k[1] = 40 > cu_seqlens_k[2] = 39")
	cuK[2] = 47
	must(t, va.Run(OpForward))
	must(t, va.SetSeqLensK(s.lens))
	wantError(t, va.Run(OpForward), StatusInvalidArgument, "seq_lens_k is bound but a varlen batch takes its key lengths from cu_seqlens_k")

	// The parameters: the library's range checks, naming the parameter and the value.
	for _, c := range []struct {
		opt  Option
		want string
	}{
		{WithPageSize(-1), "ATTN_PARAM_PAGE_SIZE (-1) is outside [0, 2.14748365e+09]"},
		{WithPageSize(1 << 31), "ATTN_PARAM_PAGE_SIZE (2147483648) is outside [0, 2.14748365e+09]"},
		{WithMaxPages(-3), "ATTN_PARAM_MAX_PAGES (-3) is outside [0, 2.14748365e+09]"},
		{WithMaxPages(1 << 40), "ATTN_PARAM_MAX_PAGES (1099511627776) is outside [0, 2.14748365e+09]"},
		{WithParamInt(ParamVarlen, 2), "ATTN_PARAM_VARLEN (2) is outside [0, 1]"},
		{WithParamInt(ParamBatchInvariant, -1), "ATTN_PARAM_BATCH_INVARIANT (-1) is outside [0, 1]"},
		{WithParamFloat(ParamPageSize, 2.5), "ATTN_PARAM_PAGE_SIZE (2.5) must be an integer"},
		{WithParamFloat(ParamVarlen, math.NaN()), "ATTN_PARAM_VARLEN must not be NaN"},
	} {
		_, err := NewDesc(3, servHQ, servHKV, 9, 66, servD, c.opt)
		wantError(t, err, StatusInvalidArgument, "attn_desc_set_", c.want)
	}
}
