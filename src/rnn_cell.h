/* rnn_cell.h: one LSTM or GRU time step's gate arithmetic as one op (rnn_cell.c), with
 * the CPU kernels (cpu_rnn_cell.c); the CUDA ones are kernels/rnn_cell.cu. */
#ifndef DP_RNN_CELL_H
#define DP_RNN_CELL_H

#include "backend.h"

/* LSTM: gates [batch, 4H] (i, f, g, o before their activations, as x W_ih^T + b_ih +
 * h W_hh^T + b_hh), c_prev [batch, H]: c = sigmoid(f) c_prev + sigmoid(i) tanh(g),
 * h = sigmoid(o) tanh(c).  Sets *h and *c (views of one [2, batch, H] result); 0 or -1.
 * Differentiable in gates and c_prev. */
int dp_lstm_cell(dp_tensor *gates, dp_tensor *c_prev, dp_tensor **h, dp_tensor **c);
/* GRU: gi, gh [batch, 3H] (r, z, n parts of x W_ih^T + b_ih and h W_hh^T + b_hh), h_prev
 * [batch, H]: r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r h_n),
 * h = (1 - z) n + z h_prev.  Differentiable in gi, gh and h_prev. */
dp_tensor *dp_gru_cell(dp_tensor *gi, dp_tensor *gh, dp_tensor *h_prev);

/* the CPU backend's entries (src/backend.h) */
int cpu_lstm_cell(const dp_view *hc, const dp_view *act, const dp_view *gates, const dp_view *c_prev, int64_t batch,
                  int64_t hidden);
int cpu_lstm_cell_backward(const dp_view *ggates, const dp_view *gc_prev, const dp_view *ghc, const dp_view *act,
                           const dp_view *c_prev, int64_t batch, int64_t hidden);
int cpu_gru_cell(const dp_view *h, const dp_view *act, const dp_view *gi, const dp_view *gh, const dp_view *h_prev,
                 int64_t batch, int64_t hidden);
int cpu_gru_cell_backward(const dp_view *ggi, const dp_view *ggh, const dp_view *gh_prev, const dp_view *gout,
                          const dp_view *act, const dp_view *h_prev, int64_t batch, int64_t hidden);

#endif
