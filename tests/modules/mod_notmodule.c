/* A shared object that is not a keel module: it exports no
 * keel_module_notmodule descriptor, only an unrelated function. */
int notmodule_answer(void);

int notmodule_answer(void)
{
    return 42;
}
