/* order.c: stream order learned from submitted work (order.h). Stub: the
 * state machine lands next; until then nothing is learned. */
#include "state/order.h"

void cp_order_submit(cudaStream_t stream, cp_submit_api_t api) { (void)stream, (void)api; }
void cp_order_give_up(const char *what) { (void)what; }
bool cp_order_learning(void) { return false; }
