"""crp-stream: the CRP knowledge fabric as an event-sourced stream processor."""

import os

# One BLAS thread: the runtimes handle one record at a time, on matrices of a few hundred rows, where
# BLAS worker threads cost more in wake-ups and spinning than they save and, on a shared machine,
# multiply the latency tail (envelope CPU time halved on 2 cores). Set before numpy is first
# imported; an explicit setting in the environment wins. Results are the same either way.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# One OpenMP thread by default, for faiss: libgomp gives every thread that never called
# ``omp_set_num_threads`` its start-up default (one per core), so the fabric thread's few-query HNSW
# searches ran on two threads whose spare one spun after each, beside the event loops on 2 cores. The
# ANN cache asks for every core itself for its adds and its batches of 32 queries or more.
os.environ.setdefault("OMP_NUM_THREADS", "1")
