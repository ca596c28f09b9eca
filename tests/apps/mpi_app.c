/* The MPI calls of tests/e2e/profile/test_mpi.py, made by exactly two ranks: point to point (blocking,
 * non-blocking, wildcard receive, sendrecv), collectives on MPI_COMM_WORLD, a communicator of its own
 * whose ranks run the other way round (so that a peer's rank in it differs from its world rank), and a
 * derived datatype. Built once per MPI implementation (mpi_app_openmpi, mpi_app_mpich). Each rank
 * prints what it received, so that a run traced and a run untraced can be compared. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "mpi_app: run with exactly 2 ranks, not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  const int other = 1 - rank;
  long long check = 0;

  /* Blocking: 10 ints 0 -> 1 (tag 7), then 3 doubles 1 -> 0, received from any source with any tag. */
  int ints[10];
  double doubles[3] = {0.5, 1.5, 2.5};
  if (rank == 0) {
    for (int i = 0; i < 10; ++i) ints[i] = i + 1;
    MPI_Send(ints, 10, MPI_INT, 1, 7, MPI_COMM_WORLD);
    MPI_Status status;
    MPI_Recv(doubles, 3, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
    check += (long long)(doubles[0] + doubles[1] + doubles[2]) + status.MPI_SOURCE * 100 + status.MPI_TAG * 1000;
  } else {
    MPI_Status status;
    MPI_Recv(ints, 10, MPI_INT, 0, 7, MPI_COMM_WORLD, &status);
    for (int i = 0; i < 10; ++i) check += ints[i];
    MPI_Send(doubles, 3, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD);
  }

  /* Non-blocking: 5 chars each way (tag 9), completed together. */
  char out[5] = {'a', 'b', 'c', 'd', (char)('0' + rank)}, in[5];
  MPI_Request requests[2];
  MPI_Irecv(in, 5, MPI_CHAR, other, 9, MPI_COMM_WORLD, &requests[0]);
  MPI_Isend(out, 5, MPI_CHAR, other, 9, MPI_COMM_WORLD, &requests[1]);
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  check += in[4];

  /* 4 ints each way in one call (tag 11). */
  int send4[4] = {rank, rank, rank, rank}, recv4[4];
  MPI_Sendrecv(send4, 4, MPI_INT, other, 11, recv4, 4, MPI_INT, other, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  check += recv4[3];

  /* Collectives on MPI_COMM_WORLD. */
  MPI_Barrier(MPI_COMM_WORLD);
  int six[6] = {0};
  if (rank == 1)
    for (int i = 0; i < 6; ++i) six[i] = 10 * i;
  MPI_Bcast(six, 6, MPI_INT, 1, MPI_COMM_WORLD);
  check += six[5];
  double two[2] = {1.0 + rank, 2.0}, two_sum[2] = {0};
  MPI_Reduce(two, two_sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  check += (long long)two_sum[0];
  long long eight[8], eight_sum[8];
  for (int i = 0; i < 8; ++i) eight[i] = rank + i;
  MPI_Allreduce(eight, eight_sum, 8, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  check += eight_sum[7];
  int mine = 100 + rank, all[2];
  MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
  check += all[0] + all[1];

  /* A communicator whose ranks run the other way round: its rank 0 is world rank 1. */
  MPI_Comm reversed;
  MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &reversed);
  int reversed_rank = -1;
  MPI_Comm_rank(reversed, &reversed_rank);
  int pair[2] = {7, 8};
  if (reversed_rank == 0) {
    MPI_Send(pair, 2, MPI_INT, 1, 21, reversed);
  } else {
    MPI_Recv(pair, 2, MPI_INT, 0, 21, reversed, MPI_STATUS_IGNORE);
    check += pair[0] + pair[1];
  }
  int one = 1, total = 0;
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, reversed);
  check += total;
  MPI_Comm_free(&reversed);

  /* A derived datatype: 2 triples of ints (24 bytes) from rank 0. */
  MPI_Datatype triple;
  MPI_Type_contiguous(3, MPI_INT, &triple);
  MPI_Type_commit(&triple);
  int triples[6] = {0};
  if (rank == 0)
    for (int i = 0; i < 6; ++i) triples[i] = i;
  MPI_Bcast(triples, 2, triple, 0, MPI_COMM_WORLD);
  MPI_Type_free(&triple);
  check += triples[5];

  printf("rank %d reversed_rank %d check %lld\n", rank, reversed_rank, check);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
