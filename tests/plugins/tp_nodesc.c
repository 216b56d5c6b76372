/* A shared object that is not a tth plugin: it exports no descriptor. */
#include <tth/plugin.h>

TTH_PLUGIN_EXPORT int tp_not_a_plugin(void);
int tp_not_a_plugin(void)
{
    return 42;
}
