/* l_rnn_cell.c: the bindings of the fused recurrent steps (torch._C.lstm_cell and
 * torch._C.gru_cell, src/rnn_cell.c) that nn.LSTM, nn.GRU and their cells (lua/nn/rnn.lua)
 * call once per time step. */
#include "l_tensor.h"
#include "../src/rnn_cell.h"

/* lstm_cell(gates [B, 4H], c_prev [B, H]) -> h, c */
static int c_lstm_cell(lua_State *L)
{
    dp_tensor *gates = lt_check(L, 1), *c_prev = lt_check(L, 2);
    dp_tensor **hs = lt_newslot(L), **cs = lt_newslot(L);
    if (dp_lstm_cell(gates, c_prev, hs, cs)) return lt_done(L, NULL);   /* raises */
    lt_done(L, *hs);
    return 2;
}

/* gru_cell(gi [B, 3H], gh [B, 3H], h_prev [B, H]) -> h */
static int c_gru_cell(lua_State *L)
{
    dp_tensor *gi = lt_check(L, 1), *gh = lt_check(L, 2), *h_prev = lt_check(L, 3);
    dp_tensor **slot = lt_newslot(L);
    return lt_done(L, *slot = dp_gru_cell(gi, gh, h_prev));
}

const luaL_Reg lt_rnn_cell_functions[] = { { "lstm_cell", c_lstm_cell }, { "gru_cell", c_gru_cell }, { NULL, NULL } };
