#include <stdio.h>
#include "tpexport/tpexport.h"
int main(void) { printf("tpexport demo placeholder\n"); return 0; }
